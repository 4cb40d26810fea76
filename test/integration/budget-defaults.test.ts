import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { AgentEventMap } from "../../src/events/agent-events.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "README.md": "# project\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const THIRTY_MINUTES = 1_800_000;
const as = (name: string) => ({ system: `"${name}"` });

async function runtime(agents: Array<Record<string, unknown>>, troupe: Record<string, unknown> = {}) {
  const config = testConfig(
    { defaultModel: "scripted", providers: { openai: { baseURL: server.baseURL } }, ...troupe },
    agents.map((agent) => ({ description: "Does things.", tools: ["read_file"], ...agent })),
  );
  return new Runtime({ config, workspace: ws, env: {} }).open();
}

async function eventsOf(rt: Runtime, runId: string): Promise<Envelope[]> {
  return (await collect(rt.bus.eventLog.read({ runId }))).map((e) => e.envelope);
}

const startedBudget = async (rt: Runtime, runId: string) => {
  const started = (await eventsOf(rt, runId)).find((e) => e.type === "agent.started");
  return (started?.data as AgentEventMap["agent.started"] | undefined)?.budget;
};

/** Reads README.md for ever while it may call tools; answers when it may not. */
const forever = (name: string) => [
  {
    match: { ...as(name), withTools: true },
    reply: { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
    times: Number.POSITIVE_INFINITY,
  },
  {
    match: { ...as(name), withTools: false },
    reply: { text: "out of turns" },
    times: Number.POSITIVE_INFINITY,
  },
];

describe("budget defaults (troupe.yaml defaults.budget)", () => {
  it("stop an agent whose YAML has no budget at the default turns, with the default wall time too", async () => {
    server.script(...forever("worker"));
    const rt = await runtime([{ name: "worker" }], { defaults: { budget: { maxTurns: 2 } } });
    const handle = rt.start({ task: "read", agent: "worker" });
    const output = await handle.done;
    expect(output).toMatchObject({ reason: "budget_exhausted", limit: "maxTurns 2", turns: 3 });
    expect(await startedBudget(rt, handle.runId)).toEqual({ maxTurns: 2, maxWallMs: THIRTY_MINUTES });
    await rt.close();
  });

  it("apply key by key: an agent setting maxTurns only keeps its own and gets the default maxWallMs", async () => {
    server.script({ match: as("capped"), reply: { text: "hi" } });
    const rt = await runtime([{ name: "capped", budget: { maxTurns: 5, maxCostUsd: 1 } }]);
    const handle = rt.start({ task: "hi", agent: "capped" });
    await handle.done;
    expect(await startedBudget(rt, handle.runId)).toEqual({
      maxTurns: 5,
      maxCostUsd: 1,
      maxWallMs: THIRTY_MINUTES,
    });
    await rt.close();
  });

  it("are 50 turns and 30 minutes when troupe.yaml says nothing; null gives none", async () => {
    server.script({ match: as("worker"), reply: { text: "hi" }, times: 2 });
    const built = await runtime([{ name: "worker" }]);
    const first = built.start({ task: "hi", agent: "worker" });
    await first.done;
    expect(await startedBudget(built, first.runId)).toEqual({ maxTurns: 50, maxWallMs: THIRTY_MINUTES });
    await built.close();
    const none = await runtime([{ name: "worker" }], {
      defaults: { budget: { maxTurns: null, maxWallMs: null } },
    });
    const second = none.start({ task: "hi", agent: "worker" });
    await second.done;
    expect(await startedBudget(none, second.runId)).toEqual({});
    await none.close();
  });

  it("reach subagents: a child without a budget gets the default turns as its own", async () => {
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: { toolCalls: [{ name: "subagent_explorer", arguments: { task: "look" } }] },
      },
      ...forever("explorer"),
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const rt = await runtime(
      [
        { name: "lead", subagents: ["explorer"] },
        { name: "explorer", readOnly: true },
      ],
      { defaults: { budget: { maxTurns: 2 } } },
    );
    const handle = rt.start({ task: "x", agent: "lead" });
    await handle.done;
    const events = await eventsOf(rt, handle.runId);
    const spawned = events.find((e) => e.type === "subagent.spawned")
      ?.data as AgentEventMap["subagent.spawned"];
    expect(spawned.budget.maxTurns).toBe(2);
    // Its wall time is the smaller of its own (the default) and what its parent has left.
    expect(spawned.budget.maxWallMs).toBeGreaterThan(THIRTY_MINUTES - 60_000);
    expect(spawned.budget.maxWallMs).toBeLessThanOrEqual(THIRTY_MINUTES);
    const stopped = events.find((e) => e.type === "agent.stopped" && e.agentId === spawned.childId)
      ?.data as AgentEventMap["agent.stopped"];
    expect(stopped).toMatchObject({ reason: "budget_exhausted", limit: "maxTurns 2", turns: 3 });
    await rt.close();
  });
});
