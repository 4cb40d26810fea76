import { describe, expect, it } from "vitest";
import { z } from "zod";
import * as troupe from "../../src/index.js";
import { createRuntime, defineTool, TroupeError, UserError } from "../../src/index.js";
import { ToolRegistry } from "../../src/tools/tool.js";
import { publicKeyOfSeed } from "../../src/trust/role-credentials.js";

describe("the error tree", () => {
  it("holds every error class the package exports", () => {
    const classes = Object.entries(troupe).filter(
      ([, value]) => typeof value === "function" && value.prototype instanceof Error,
    );
    expect(classes.length).toBeGreaterThan(10);
    const outside = classes
      .filter(([name, value]) => name !== "TroupeError" && !(value.prototype instanceof TroupeError))
      .map(([name]) => name);
    expect(outside).toEqual([]);
  });

  it("makes what a caller mends a UserError: settings without agents, a tool of a name taken, a seed that is not one", async () => {
    await expect(createRuntime({ settings: { defaultModel: "m" } })).rejects.toBeInstanceOf(UserError);

    const tool = () =>
      defineTool({
        name: "twice",
        description: "Says twice.",
        parameters: z.object({}),
        effect: "read",
        execute: async () => ({ ok: true, output: "twice" }),
      });
    expect(() => new ToolRegistry([tool(), tool()])).toThrow(UserError);
    expect(() => new ToolRegistry([tool()]).with([tool()])).toThrow(/"twice" is registered twice/);

    expect(() => publicKeyOfSeed("not a seed", "/data/credentials/lead.nk")).toThrow(UserError);
    expect(() => publicKeyOfSeed("not a seed", "/data/credentials/lead.nk")).toThrow(
      /^\/data\/credentials\/lead\.nk: not an nkey seed/,
    );
  });
});
