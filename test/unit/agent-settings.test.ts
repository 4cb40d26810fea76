import { describe, expect, it } from "vitest";
import { resolveAgentSettings } from "../../src/actors/agent-settings.js";
import type { AgentRecord } from "../../src/actors/agent-store.js";
import { agentSchema } from "../../src/config/agent-schema.js";
import { troupeConfigSchema } from "../../src/config/schema.js";
import type { ResolvedModel } from "../../src/model/model-router.js";

const config = troupeConfigSchema.parse({
  defaultModel: "small",
  approval: { policy: "auto-edit" },
  defaults: { budget: { maxTurns: 30, maxWallMs: 60_000 } },
  plan: { maxTurns: 5 },
});
const models: Record<string, number> = { small: 8000, big: 200_000 };
const resolve = (id: string): ResolvedModel => ({
  id,
  provider: "openai",
  name: id,
  contextWindow: models[id] ?? 1000,
  prices: undefined,
  strictTools: false,
});
const agent = (raw: Record<string, unknown> = {}) =>
  agentSchema.parse({ name: "coder", description: "Codes.", ...raw });
const settingsOf = (options: Parameters<typeof resolveAgentSettings>[1]) =>
  resolveAgentSettings(config, options, resolve, undefined);

describe("an agent's settings, resolved alone", () => {
  it("take the model chain, its window and a reply reserve of a tenth (at most 4096 tokens)", () => {
    const small = settingsOf({ definition: agent({ fallbackModels: ["big"] }) });
    expect(small).toMatchObject({ chain: ["small", "big"], compaction: { contextWindow: 8000 }, reply: 800 });
    expect(settingsOf({ definition: agent({ model: "big" }) }).reply).toBe(4096);
  });

  it("take the agent's approval over the run's over troupe.yaml's", () => {
    expect(settingsOf({ definition: agent() }).policy).toBe("auto-edit");
    expect(settingsOf({ definition: agent(), approval: "ask" }).policy).toBe("ask");
    expect(settingsOf({ definition: agent({ approval: "never-ask" }), approval: "ask" }).policy).toBe(
      "never-ask",
    );
  });

  it("make every subagent read-only whatever its YAML says, and an agent marked so, and one planning", () => {
    expect(settingsOf({ definition: agent() }).readOnlyBecause).toBeUndefined();
    expect(settingsOf({ definition: agent(), depth: 1 }).readOnlyBecause).toBe("read-only");
    expect(settingsOf({ definition: agent({ readOnly: true }) }).readOnlyBecause).toBe("read-only");
    expect(settingsOf({ definition: agent(), mode: "plan" }).readOnlyBecause).toBe("in plan mode");
  });

  it("take a budget from the record of a resumed agent, else the one carved for it, else its YAML over the defaults", () => {
    expect(settingsOf({ definition: agent({ budget: { maxTurns: 9 } }) }).budget).toEqual({
      maxTurns: 9,
      maxWallMs: 60_000,
    });
    expect(settingsOf({ definition: agent(), budget: { maxTokens: 100 } }).budget).toEqual({
      maxTokens: 100,
    });
    const restore = { budget: { maxToolCalls: 3 } } as AgentRecord;
    expect(settingsOf({ definition: agent(), budget: { maxTokens: 100 }, restore }).budget).toEqual({
      maxToolCalls: 3,
    });
  });

  it("cap a planning agent's turns at plan.maxTurns", () => {
    expect(settingsOf({ definition: agent(), mode: "plan" }).budget.maxTurns).toBe(5);
    expect(settingsOf({ definition: agent({ budget: { maxTurns: 2 } }), mode: "plan" }).budget.maxTurns).toBe(
      2,
    );
  });

  it("take the run's sandbox mode over the agent's over troupe.yaml's, and say why there is none", () => {
    const withMode = settingsOf({ definition: agent({ sandbox: "read-only" }), sandbox: "workspace-write" });
    expect(withMode.sandbox).toEqual({ unavailable: undefined, mode: "workspace-write", network: false });
    const none = resolveAgentSettings(config, { definition: agent() }, resolve, "no bwrap");
    expect(none.sandbox.unavailable).toBe("no bwrap");
  });
});
