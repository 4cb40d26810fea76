import { describe, expect, it } from "vitest";
import { z } from "zod";
import { z as z3 } from "zod/v3";
import { parseArguments, planCalls } from "../../src/tools/plan.js";
import { defineTool, ToolRegistry } from "../../src/tools/tool.js";
import { parseArgs, type ToolSchema, ToolSchemaError } from "../../src/tools/tool-schema.js";

/*
 * A tool's schema comes from the program's zod, which may be zod 3: `zod/v3` is zod 3's own code
 * (zod 4 ships it), with none of zod 4's internals. test/e2e/library-install.test.ts does the same
 * with zod 3 installed from the registry.
 */
const call = (name: string, args: unknown) => ({
  id: `${name}-${JSON.stringify(args)}`,
  type: "function" as const,
  function: { name, arguments: JSON.stringify(args) },
});

describe("a tool's parameters", () => {
  for (const [zod, make] of [
    ["zod 3", () => z3.object({ city: z3.string().describe("The city"), days: z3.number().default(1) })],
    ["zod 4", () => z.object({ city: z.string().describe("The city"), days: z.number().default(1) })],
  ] as const) {
    it(`from ${zod}: shown to the model as JSON Schema, and check and fill in its arguments`, () => {
      const weather = defineTool({
        name: "weather",
        description: "Weather.",
        effect: "read",
        parameters: make(),
        execute: ({ city, days }) => ({ ok: true, output: `${city} ${days}` }),
      });
      const registry = new ToolRegistry([weather]);
      const parameters = registry.spec("weather")?.parameters;
      expect(parameters).toMatchObject({
        type: "object",
        properties: { city: { type: "string", description: "The city" }, days: { type: "number" } },
        required: ["city"],
      });
      expect(parameters).not.toHaveProperty("$schema");

      const [good, bad] = planCalls(
        [call("weather", { city: "Lisbon" }), call("weather", { city: 5 })],
        registry,
        new Set(["weather"]),
        "yolo",
      );
      expect(good?.result).toBeUndefined();
      expect(parseArguments(weather.parameters, good?.arguments ?? "")).toEqual({ city: "Lisbon", days: 1 });
      expect(bad?.result?.error).toMatch(/^invalid arguments for weather: city: .*string.*number/i);
    });
  }

  it("are refused when they check asynchronously: arguments are checked at once", () => {
    const slow = z.object({ city: z.string().refine(async () => true) });
    expect(() => parseArgs(slow, { city: "Lisbon" }, "weather")).toThrow(ToolSchemaError);
    expect(() => parseArgs(slow, { city: "Lisbon" }, "weather")).toThrow(
      /^weather: its schema checks asynchronously/,
    );
  });

  it("are refused, naming the tool, when no JSON Schema can be made of them", () => {
    const foreign: ToolSchema<{ city: string }> = {
      "~standard": {
        version: 1,
        vendor: "elsewhere",
        validate: (value) => ({ value: value as { city: string } }),
      },
    };
    const registry = new ToolRegistry([
      defineTool({
        name: "odd",
        description: "Odd.",
        effect: "read",
        parameters: foreign,
        execute: () => ({ ok: true, output: "" }),
      }),
    ]);
    expect(() => registry.spec("odd")).toThrow(
      'tool "odd": no JSON Schema can be made of its parameters (a schema of "elsewhere"); define it with zod 4, or zod 3.25 or later',
    );
  });
});
