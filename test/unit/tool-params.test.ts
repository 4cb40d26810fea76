import { describe, expect, it } from "vitest";
import { strictFits, toolParams } from "../../src/model/tool-params.js";

const spec = (name: string, parameters: Record<string, unknown>) => ({
  name,
  description: `${name}.`,
  parameters,
});
const closed = {
  type: "object",
  properties: { a: { type: "string" } },
  required: ["a"],
  additionalProperties: false,
};
const optional = { type: "object", properties: { a: { type: "string" } }, additionalProperties: false };

describe("a request's tools and tool_choice", () => {
  it("strict only when asked for and the schema fits: closed and every property required, at every depth", () => {
    expect(strictFits(closed)).toBe(true);
    expect(strictFits(optional)).toBe(false);
    expect(strictFits({ ...closed, additionalProperties: undefined })).toBe(false);
    expect(strictFits({ ...closed, properties: { a: { type: "array", items: { ...optional } } } })).toBe(
      false,
    );
    expect(strictFits({ type: "object", properties: {}, required: [], additionalProperties: false })).toBe(
      true,
    );
    const { tools } = toolParams([spec("fits", closed), spec("loose", optional)], true);
    expect(tools?.map((tool) => tool.type === "function" && tool.function.strict)).toEqual([true, undefined]);
    const off = toolParams([spec("fits", closed)], false).tools;
    expect(off?.[0]?.type === "function" && off[0].function).not.toHaveProperty("strict");
  });

  it("a choice only with tools; a tool's name that is not among them leaves the choice to the model", () => {
    expect(toolParams(undefined, false, "required")).toEqual({ tools: undefined, tool_choice: undefined });
    expect(toolParams([], false, "required").tool_choice).toBeUndefined();
    const specs = [spec("grep", closed)];
    for (const keyword of ["auto", "required", "none"] as const)
      expect(toolParams(specs, false, keyword).tool_choice).toBe(keyword);
    expect(toolParams(specs, false, "grep").tool_choice).toEqual({
      type: "function",
      function: { name: "grep" },
    });
    expect(toolParams(specs, false, "shell").tool_choice).toBeUndefined();
    expect(toolParams(specs, false).tool_choice).toBeUndefined();
  });
});
