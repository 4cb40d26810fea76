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

  it("are shown closed (additionalProperties: false) at every depth where the schema does not say", () => {
    const tool = defineTool({
      name: "search",
      description: "Search.",
      effect: "read",
      parameters: z.object({
        query: z.string(),
        options: z.object({ limit: z.number() }).optional(),
        labels: z.record(z.string(), z.string()).optional(),
        extra: z.looseObject({ a: z.string() }).optional(),
      }),
      execute: () => ({ ok: true, output: "" }),
    });
    const mcp = {
      ...tool,
      name: "remote",
      jsonSchema: { type: "object", properties: { q: { type: "string" } }, additionalProperties: true },
    };
    const registry = new ToolRegistry([tool, mcp]);
    const shown = registry.spec("search")?.parameters as Record<
      string,
      Record<string, Record<string, unknown>>
    >;
    expect(shown.additionalProperties).toBe(false);
    expect(shown.properties?.options?.additionalProperties).toBe(false);
    expect(shown.properties?.labels?.additionalProperties).toEqual({ type: "string" });
    expect(shown.properties?.extra?.additionalProperties).toEqual({});
    expect(registry.spec("remote")?.parameters.additionalProperties).toBe(true);
  });

  it("refuse unknown keys, naming them and the keys there are, rather than drop them", () => {
    const tool = defineTool({
      name: "search",
      description: "Search.",
      effect: "read",
      parameters: z.object({ query: z.string(), options: z.object({ limit: z.number() }).optional() }),
      execute: () => ({ ok: true, output: "" }),
    });
    const registry = new ToolRegistry([tool]);
    const [typo, nested, many, good] = planCalls(
      [
        call("search", { query: "x", qurey: "y" }),
        call("search", { query: "x", options: { limit: 1, page: 2 } }),
        call("search", { query: "x", a: 1, b: 2, c: 3, d: 4, e: 5, f: 6 }),
        call("search", { query: "x", options: { limit: 1 } }),
      ],
      registry,
      new Set(["search"]),
      "yolo",
    );
    expect(typo?.decision).toBe("deny");
    expect(typo?.result?.error).toBe(
      'invalid arguments for search: unknown argument "qurey" (did you mean "query"?); the arguments are query, options',
    );
    expect(typo?.result?.recoveryHint).toContain('"additionalProperties":false');
    expect(nested?.result?.error).toBe(
      'invalid arguments for search: unknown key "page" in options; the keys are limit',
    );
    expect(many?.result?.error).toBe(
      'invalid arguments for search: unknown arguments "a", "b", "c", "d", "e" and 1 more; the arguments are query, options',
    );
    expect(good?.result).toBeUndefined();
  });

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
