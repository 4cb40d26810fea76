import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { buildRunTree } from "../../src/actors/run-tree.js";
import { Runtime } from "../../src/actors/runtime.js";
import type { AgentEventMap } from "../../src/events/agent-events.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import type { AgentOutput } from "../../src/machines/agent-types.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { FILESYSTEM } from "../support/mcp-servers.js";
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

const lead = {
  name: "lead",
  description: "Leads.",
  tools: ["read_file"],
  subagents: ["explorer", "reviewer"],
};
const explorer = {
  name: "explorer",
  description: "Finds where things are.",
  tools: ["read_file", "grep"],
  readOnly: true,
};
const reviewer = { name: "reviewer", description: "Reviews changes.", tools: ["read_file"], readOnly: true };
const as = (name: string) => ({ system: `"${name}"` });

async function runtime(agents: Array<Record<string, unknown>>, troupe: Record<string, unknown> = {}) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: {
        openai: { baseURL: server.baseURL, models: { scripted: { inputPerMTok: 1, outputPerMTok: 2 } } },
      },
      ...troupe,
    },
    agents,
  );
  return new Runtime({ config, workspace: ws, env: {} }).open();
}

async function eventsOf(rt: Runtime, runId: string): Promise<Envelope[]> {
  return (await collect(rt.bus.eventLog.read({ runId }))).map((e) => e.envelope);
}

const subagentCall = (name: string, task: string) => ({ name: `subagent_${name}`, arguments: { task } });

describe("subagents", () => {
  it("appear to the parent as subagent_<name> tools with {task, context?} and the subagent's description", async () => {
    server.script({ match: as("lead"), reply: { text: "nothing to delegate" } });
    const rt = await runtime([lead, explorer, reviewer]);
    await rt.start({ task: "hi", agent: "lead" }).done;
    const tools = server.requests[0]?.body.tools?.map((t) => t.function) ?? [];
    const explorerTool = tools.find((t) => t.name === "subagent_explorer");
    expect(explorerTool?.description).toBe("Finds where things are.");
    expect(explorerTool?.parameters).toMatchObject({
      type: "object",
      properties: { task: { type: "string" }, context: { type: "string" } },
      required: ["task"],
    });
    expect(tools.map((t) => t.name)).toEqual(["read_file", "subagent_explorer", "subagent_reviewer"]);
    await rt.close();
  });

  it("run as child actors in parallel: three children of 300 ms all spawned before the first finishes", async () => {
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: {
          toolCalls: [
            subagentCall("explorer", "find A"),
            subagentCall("explorer", "find B"),
            subagentCall("explorer", "find C"),
          ],
        },
      },
      {
        match: as("explorer"),
        reply: (request) => ({
          text: `found ${String(request.messages[1]?.content).slice(-1)}`,
          delayMs: 300,
        }),
        times: 3,
      },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "A, B and C found." } },
    );
    const rt = await runtime([lead, explorer, reviewer]);
    const handle = rt.start({ task: "Find A, B and C", agent: "lead" });
    const output = await handle.done;
    expect(output).toMatchObject({ reason: "done", result: "A, B and C found." });
    server.assertComplete();
    const events = await eventsOf(rt, handle.runId);
    const spawned = events.filter((e) => e.type === "subagent.spawned");
    const finished = events.filter((e) => e.type === "subagent.finished");
    expect(spawned).toHaveLength(3);
    expect(finished.map((e) => (e.data as { reason: string }).reason)).toEqual(["done", "done", "done"]);
    // In parallel: all three were running before any finished (one after another, each 300 ms
    // answer would end its child before the next was spawned).
    const lastSpawned = events.lastIndexOf(spawned[2] as (typeof events)[number]);
    expect(lastSpawned).toBeLessThan(events.indexOf(finished[0] as (typeof events)[number]));
    // Each child is an actor of its own: its own id, its own machine, parentId on every event.
    const childIds = spawned.map((e) => (e.data as { childId: string }).childId);
    for (const childId of childIds) {
      const own = events.filter((e) => e.agentId === childId);
      expect(own[0]?.type).toBe("agent.started");
      expect(own.every((e) => e.parentId === handle.agentId)).toBe(true);
      expect(own.filter((e) => e.type === "state.changed").map((e) => (e.data as { to: string }).to)).toEqual(
        ["callingModel", "stopped"],
      );
      expect(own.map((e) => e.seq)).toEqual(own.map((_, i) => i));
    }
    // The parent got the answers as structured tool results.
    const results =
      server.requests
        .at(-1)
        ?.body.messages.filter((m) => m.role === "tool")
        .map((m) => m.content) ?? [];
    expect(results[0]).toContain("found A");
    expect(results[0]).toMatch(
      /\[subagent explorer \(explorer-[a-z0-9]+\) stopped: done; \d+ tokens, 0 tool calls, \$0\.\d{4}\]/,
    );
    await rt.close();
  });

  it("carve budgets from the parent and charge what they spend back up, over three levels", async () => {
    const top = {
      name: "top",
      description: "Top.",
      tools: [],
      subagents: ["mid"],
      budget: { maxTokens: 50_000, maxToolCalls: 20, maxCostUsd: 1 },
    };
    const mid = {
      name: "mid",
      description: "Mid.",
      tools: ["read_file"],
      subagents: ["leaf"],
      readOnly: true,
      budget: { maxTurns: 5, maxTokens: 8000 },
    };
    const leaf = {
      name: "leaf",
      description: "Leaf.",
      tools: ["read_file"],
      readOnly: true,
      budget: { maxTurns: 5, maxTokens: 100_000, maxToolCalls: 50 },
    };
    server.script(
      { match: { ...as("top"), turn: 1 }, reply: { toolCalls: [subagentCall("mid", "go down")] } },
      {
        match: { ...as("mid"), turn: 1 },
        reply: {
          toolCalls: [
            subagentCall("leaf", "read it"),
            { name: "read_file", arguments: { path: "README.md" } },
          ],
        },
      },
      {
        match: { ...as("leaf"), turn: 1 },
        reply: { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
      },
      { match: { ...as("leaf"), turn: 2 }, reply: { text: "leaf read it" } },
      { match: { ...as("mid"), turn: 2 }, reply: { text: "mid done" } },
      { match: { ...as("top"), turn: 2 }, reply: { text: "top done" } },
    );
    const rt = await runtime([top, mid, leaf]);
    const handle = rt.start({ task: "Go", agent: "top" });
    const output = await handle.done;
    expect(output.reason).toBe("done");
    const events = await eventsOf(rt, handle.runId);
    const stopped = new Map(
      events.filter((e) => e.type === "agent.stopped").map((e) => [e.agentId, e.data as AgentOutput]),
    );
    const started = events
      .filter((e) => e.type === "agent.started")
      .map((e) => ({ id: e.agentId, ...(e.data as AgentEventMap["agent.started"]) }));
    const idOf = (name: string) => started.find((s) => s.name === name)?.id ?? "";
    const [topId, midId, leafId] = [idOf("top"), idOf("mid"), idOf("leaf")] as [string, string, string];
    const own = (id: string) => stopped.get(id) as AgentOutput;
    const tokens = (u: { inputTokens: number; outputTokens: number }) => u.inputTokens + u.outputTokens;

    // Carving: mid gets min(its 8000, what top had left); leaf gets min(100000, what mid had left).
    const midBudget = started.find((s) => s.name === "mid")?.budget;
    expect(midBudget).toMatchObject({ maxTurns: 5, maxTokens: 8000, maxToolCalls: 20 });
    expect(midBudget?.maxCostUsd).toBeCloseTo(1 - costOfFirstTurn(events, topId), 12);
    const leafBudget = started.find((s) => s.name === "leaf")?.budget;
    expect(leafBudget?.maxTurns).toBe(5);
    expect(leafBudget?.maxTokens).toBe(8000 - firstTurnTokens(events, midId));
    expect(leafBudget?.maxToolCalls).toBe(20);
    // Charging: each total is its own spend plus its children's totals; the run's total is the sum over the tree.
    expect(own(leafId).total.toolCalls).toBe(1);
    expect(own(midId).total.toolCalls).toBe(own(midId).toolCalls + own(leafId).total.toolCalls);
    expect(own(midId).toolCalls).toBe(2);
    expect(own(topId).total.toolCalls).toBe(own(topId).toolCalls + own(midId).total.toolCalls);
    expect(tokens(own(midId).total.usage)).toBe(tokens(own(midId).usage) + tokens(own(leafId).total.usage));
    expect(tokens(own(topId).total.usage)).toBe(tokens(own(topId).usage) + tokens(own(midId).total.usage));
    const sumOfOwn = [topId, midId, leafId].reduce((n, id) => n + tokens(own(id).usage), 0);
    expect(tokens(own(topId).total.usage)).toBe(sumOfOwn);
    expect(own(topId).total.usage.costUsd).toBeCloseTo(
      [topId, midId, leafId].reduce((n, id) => n + own(id).usage.costUsd, 0),
      12,
    );
    await rt.close();
  });

  it("share what the parent has left among the subagent calls of one batch, in the model's order", async () => {
    const parent = { ...lead, budget: { maxTokens: 90_000, maxToolCalls: 30 } };
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: {
          toolCalls: [
            subagentCall("explorer", "one"),
            { name: "read_file", arguments: { path: "README.md" } },
            subagentCall("reviewer", "two"),
            subagentCall("explorer", "three"),
          ],
        },
      },
      { match: as("explorer"), reply: { text: "seen" }, times: 2 },
      { match: as("reviewer"), reply: { text: "fine" } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const rt = await runtime([parent, explorer, reviewer]);
    const handle = rt.start({ task: "Look around", agent: "lead" });
    expect((await handle.done).reason).toBe("done");
    const events = await eventsOf(rt, handle.runId);
    const budgets = events
      .filter((e) => e.type === "subagent.spawned")
      .map((e) => (e.data as AgentEventMap["subagent.spawned"]).budget);
    const left = 90_000 - firstTurnTokens(events, handle.agentId);
    // Three children, each about a third of what was left (a read_file between them takes no share).
    expect(budgets.map((budget) => budget.maxTokens)).toEqual([
      Math.floor(left / 3),
      Math.floor((left - Math.floor(left / 3)) / 2),
      left - Math.floor(left / 3) - Math.floor((left - Math.floor(left / 3)) / 2),
    ]);
    expect(budgets.map((budget) => budget.maxToolCalls)).toEqual([10, 10, 10]);
    await rt.close();
  });

  it("keep a parent within its own budget through its children", async () => {
    const parent = { ...lead, budget: { maxTokens: 1500 } };
    server.script(
      {
        match: { ...as("lead"), withTools: true },
        reply: { toolCalls: [subagentCall("explorer", "look")] },
        times: 5,
      },
      {
        match: { ...as("explorer"), withTools: true },
        reply: { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
        times: 50,
      },
      { match: { ...as("explorer"), withTools: false }, reply: { text: "out of budget" }, times: 50 },
      { match: { ...as("lead"), withTools: false }, reply: { text: "final" } },
    );
    const rt = await runtime([parent, { ...explorer, budget: { maxTurns: 50 } }, reviewer]);
    const handle = rt.start({ task: "Look around", agent: "lead" });
    const output = await handle.done;
    expect(output.reason).toBe("budget_exhausted");
    const events = await eventsOf(rt, handle.runId);
    const childBudgets = events
      .filter((e) => e.type === "subagent.spawned")
      .map((e) => (e.data as { budget: { maxTokens: number } }).budget.maxTokens);
    expect(childBudgets[0]).toBeLessThan(1500);
    // Over by at most the one final call of each agent that ran out.
    const finalCalls =
      events.filter((e) => e.type === "model.completed").length -
      server.requests.filter((r) => (r.body.tools?.length ?? 0) > 0).length;
    const perCall = Math.max(
      ...events
        .filter((e) => e.type === "model.completed")
        .map((e) => tokens((e.data as AgentEventMap["model.completed"]).usage)),
    );
    expect(tokens(output.total.usage)).toBeLessThanOrEqual(1500 + finalCalls * perCall);
    await rt.close();
    function tokens(u: { inputTokens: number; outputTokens: number }) {
      return u.inputTokens + u.outputTokens;
    }
  });

  it("return a failed child's error as a result, keep its siblings' answers, and the parent goes on", async () => {
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: { toolCalls: [subagentCall("explorer", "ok one"), subagentCall("reviewer", "broken one")] },
      },
      { match: as("explorer"), reply: { text: "explorer's answer", delayMs: 100 } },
      { match: as("reviewer"), reply: { error: { status: 400, message: "bad request" } } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "used what worked" } },
    );
    const rt = await runtime([lead, explorer, reviewer]);
    const output = await rt.start({ task: "Two things", agent: "lead" }).done;
    expect(output).toMatchObject({ reason: "done", result: "used what worked" });
    const results =
      server.requests
        .at(-1)
        ?.body.messages.filter((m) => m.role === "tool")
        .map((m) => m.content) ?? [];
    expect(results[0]).toContain("explorer's answer");
    expect(results[1]).toMatch(
      /^error:\n<tool_output source="[^"]+">\nsubagent reviewer stopped: failed \(400 from http:\/\/127\.0\.0\.1:\d+\/v1 \(provider openai, model scripted\): bad request\)/,
    );
    await rt.close();
  });

  it("stop a child at its own hard wall (budget_exhausted); the parent is never held", async () => {
    server.script(
      { match: { ...as("lead"), turn: 1 }, reply: { toolCalls: [subagentCall("explorer", "slow")] } },
      { match: as("explorer"), reply: { text: "too late", delayMs: 5000 }, times: 2 },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "went on without it" } },
    );
    const rt = await runtime([lead, { ...explorer, budget: { maxWallMs: 300 } }, reviewer]);
    const started = Date.now();
    const handle = rt.start({ task: "x", agent: "lead" });
    const output = await handle.done;
    expect(Date.now() - started).toBeLessThan(3000);
    expect(output.result).toBe("went on without it");
    const events = await eventsOf(rt, handle.runId);
    expect(events.find((e) => e.type === "subagent.finished")?.data).toMatchObject({
      reason: "budget_exhausted",
    });
    const results =
      server.requests
        .at(-1)
        ?.body.messages.filter((m) => m.role === "tool")
        .map((m) => m.content) ?? [];
    expect(results[0]).toContain("subagent explorer stopped: budget_exhausted");
    await rt.close();
  });

  it("call a child nobody hosts a timeout, a second past its wall and grace; the parent goes on", async () => {
    server.script(
      { match: { ...as("lead"), turn: 1 }, reply: { toolCalls: [subagentCall("explorer", "lost")] } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "went on without it" } },
    );
    const rt = await runtime([lead, { ...explorer, budget: { maxWallMs: 300 } }, reviewer]);
    // A worker that takes the child and is gone before it hosts it.
    const taker = rt.bus.reply(rt.bus.subjects.workSpawn(), (request) =>
      makeEnvelope({ runId: request.runId, agentId: "lost-worker", seq: 0, type: "spawn.reply", data: {} }),
    );
    const started = Date.now();
    const handle = rt.start({ task: "x", agent: "lead" });
    const output = await handle.done;
    taker.unsubscribe();
    // 300 ms, 30 of grace and a second (the child would have stopped itself by then); then two
    // more for the abort nobody answers.
    expect(Date.now() - started).toBeGreaterThanOrEqual(3330);
    expect(Date.now() - started).toBeLessThan(6000);
    expect(output.result).toBe("went on without it");
    const events = await eventsOf(rt, handle.runId);
    expect(events.find((e) => e.type === "subagent.finished")?.data).toMatchObject({ reason: "timeout" });
    await rt.close();
  });

  it("abort with their parent, all the way down", async () => {
    const nested = { ...explorer, subagents: ["reviewer"] };
    server.script(
      { match: { ...as("lead"), turn: 1 }, reply: { toolCalls: [subagentCall("explorer", "deep")] } },
      { match: as("explorer"), reply: { toolCalls: [subagentCall("reviewer", "deeper")] } },
      { match: as("reviewer"), reply: { text: "slow ".repeat(100), chunks: 100, chunkDelayMs: 50 } },
    );
    const rt = await runtime([lead, nested, reviewer]);
    const handle = rt.start({ task: "x", agent: "lead" });
    for await (const e of rt.bus.eventLog.read({ runId: handle.runId, follow: true })) {
      if (
        e.envelope.type === "model.delta" &&
        e.envelope.parentId !== undefined &&
        e.envelope.parentId !== handle.agentId
      )
        break;
    }
    const abortedAt = Date.now();
    handle.abort("user pressed Ctrl-C");
    const output = await handle.done;
    expect(output.reason).toBe("aborted");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const events = await eventsOf(rt, handle.runId);
    const stopped = events.filter((e) => e.type === "agent.stopped");
    expect(stopped).toHaveLength(3);
    expect(stopped.map((e) => (e.data as AgentOutput).reason)).toEqual(["aborted", "aborted", "aborted"]);
    expect(Math.max(...stopped.map((e) => e.ts)) - abortedAt).toBeLessThan(1000);
    await rt.close();
  });

  it("refuse a spawn past the depth limit or the concurrency limit, with an error result and no child", async () => {
    const nested = { ...explorer, subagents: ["reviewer"] };
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: {
          toolCalls: [
            subagentCall("explorer", "a"),
            subagentCall("explorer", "b"),
            subagentCall("explorer", "c"),
          ],
        },
      },
      {
        match: as("explorer"),
        reply: { toolCalls: [subagentCall("reviewer", "too deep")], delayMs: 100 },
        times: 2,
      },
      { match: { ...as("explorer"), turn: 2 }, reply: { text: "explored" }, times: 2 },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "ok" } },
    );
    const rt = await runtime([lead, nested, reviewer], { subagents: { maxDepth: 1, maxConcurrent: 2 } });
    const handle = rt.start({ task: "x", agent: "lead" });
    await handle.done;
    const events = await eventsOf(rt, handle.runId);
    expect(events.filter((e) => e.type === "subagent.spawned")).toHaveLength(2);
    const leadResults =
      server.requests
        .at(-1)
        ?.body.messages.filter((m) => m.role === "tool")
        .map((m) => m.content) ?? [];
    expect(leadResults[2]).toMatch(/^error:\n<tool_output source="[^"]+">\n2 subagents are already running/);
    const explorerRequest = server.requests.find(
      (r) =>
        String(r.body.messages[0]?.content).includes('"explorer"') &&
        r.body.messages.some((m) => m.role === "tool"),
    );
    expect(explorerRequest?.body.messages.find((m) => m.role === "tool")?.content).toMatch(
      /^error:\n<tool_output source="[^"]+">\nsubagents may nest at most 1 deep/,
    );
    await rt.close();
  });

  it("get read tools only: a write tool in a child's list is refused when it is called", async () => {
    const sneaky = { ...explorer, tools: ["read_file", "write_file"] };
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: { toolCalls: [subagentCall("explorer", "write something")] },
      },
      {
        match: { ...as("explorer"), turn: 1 },
        reply: { toolCalls: [{ name: "write_file", arguments: { path: "x.txt", content: "x" } }] },
      },
      { match: { ...as("explorer"), turn: 2 }, reply: { text: "could not write" } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "ok" } },
    );
    const rt = await runtime([lead, sneaky, reviewer]);
    await rt.start({ task: "x", agent: "lead" }).done;
    const childRequest = server.requests.find(
      (r) =>
        String(r.body.messages[0]?.content).includes('"explorer"') &&
        r.body.messages.some((m) => m.role === "tool"),
    );
    expect(childRequest?.body.messages.find((m) => m.role === "tool")?.content).toContain(
      "write_file writes, and this agent is read-only",
    );
    await rt.close();
  });

  it("are read-only whatever their YAML says: a child not marked readOnly that lists an MCP server's write tool, under yolo, writes nothing", async () => {
    const scribe = {
      name: "scribe",
      description: "Writes notes.",
      tools: ["read_file", "files__write_file", "files__read_text_file"],
    };
    const target = join(ws, "note.txt");
    server.script(
      { match: { ...as("lead"), turn: 1 }, reply: { toolCalls: [subagentCall("scribe", "write a note")] } },
      {
        match: { ...as("scribe"), turn: 1 },
        reply: {
          toolCalls: [
            { name: "files__write_file", arguments: { path: target, content: "written" } },
            { name: "files__read_text_file", arguments: { path: join(ws, "README.md") } },
          ],
        },
      },
      { match: { ...as("scribe"), turn: 2 }, reply: { text: "could not write" } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "ok" } },
    );
    const files = { command: process.execPath, args: [FILESYSTEM, ws] };
    const rt = await runtime([{ ...lead, subagents: ["scribe"] }, scribe], { mcpServers: { files } });
    const output = await rt.start({ task: "x", agent: "lead", approval: "yolo" }).done;
    expect(output.reason).toBe("done");
    expect(existsSync(target)).toBe(false);
    const childRequests = server.requests.filter((r) =>
      String(r.body.messages[0]?.content).includes('"scribe"'),
    );
    expect(childRequests[0]?.body.tools?.map((t) => t.function.name)).toEqual([
      "read_file",
      "files__read_text_file",
    ]);
    const results = childRequests[1]?.body.messages
      .filter((m) => m.role === "tool")
      .map((m) => String(m.content));
    expect(results?.[0]).toContain("this agent is read-only");
    expect(results?.[1]).toContain("# project");
    await rt.close();
  });

  it("can be rebuilt as a tree, with each agent's state and spend, from the event log alone", async () => {
    server.script(
      {
        match: { ...as("lead"), turn: 1 },
        reply: { toolCalls: [subagentCall("explorer", "a"), subagentCall("reviewer", "b")] },
      },
      { match: as("explorer"), reply: { text: "a" } },
      { match: as("reviewer"), reply: { text: "b" } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const rt = await runtime([lead, explorer, reviewer]);
    const handle = rt.start({ task: "x", agent: "lead" });
    const output = await handle.done;
    const tree = buildRunTree(await eventsOf(rt, handle.runId));
    expect(tree).toHaveLength(1);
    const [root] = tree;
    expect(root).toMatchObject({
      agentId: handle.agentId,
      name: "lead",
      depth: 0,
      state: "stopped",
      reason: "done",
    });
    expect(root?.children.map((c) => [c.name, c.depth, c.state, c.reason])).toEqual([
      ["explorer", 1, "stopped", "done"],
      ["reviewer", 1, "stopped", "done"],
    ]);
    expect(root?.usage).toEqual(output.total.usage);
    await rt.close();
  });
});

/** Tokens of an agent's first model call, from its model.completed event. */
function firstTurnTokens(events: Envelope[], agentId: string): number {
  const first = events.find((e) => e.agentId === agentId && e.type === "model.completed")
    ?.data as AgentEventMap["model.completed"];
  return first.usage.inputTokens + first.usage.outputTokens;
}

function costOfFirstTurn(events: Envelope[], agentId: string): number {
  const first = events.find((e) => e.agentId === agentId && e.type === "model.completed")
    ?.data as AgentEventMap["model.completed"];
  return first.usage.costUsd;
}

describe("a subagent's shell", () => {
  it("runs in the read-only sandbox without asking, even when its parent runs under yolo", async () => {
    server.script(
      { match: { ...as("lead"), turn: 1 }, reply: { toolCalls: [subagentCall("explorer", "look")] } },
      {
        match: { ...as("explorer"), turn: 1 },
        reply: {
          toolCalls: [
            { name: "shell", arguments: { command: "ls && cat README.md" } },
            { name: "shell", arguments: { command: "touch written.txt; echo x >> README.md" } },
          ],
        },
      },
      { match: { ...as("explorer"), turn: 2 }, reply: { text: "looked" } },
      { match: { ...as("lead"), turn: 2 }, reply: { text: "done" } },
    );
    const rt = await runtime([lead, { ...explorer, tools: ["read_file", "shell"] }]);
    const output = await rt.start({ task: "hi", agent: "lead", approval: "yolo" }).done;
    expect(output.reason).toBe("done");
    const child = server.requests.find(
      (r) =>
        r.body.messages[0]?.content?.includes('"explorer"') && r.body.messages.some((m) => m.role === "tool"),
    );
    const results = child?.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content)) ?? [];
    expect(results[0]).toContain("# project");
    expect(results[1]).toContain("Read-only file system");
    expect(existsSync(join(ws, "written.txt"))).toBe(false);
    expect(readFileSync(join(ws, "README.md"), "utf8")).toBe("# project\n");
    await rt.close();
  });
});
