import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
const prefix = uniquePrefix();
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({}));
});
afterEach(async () => {
  await server.close();
  dispose();
  await removePrefix(inject("natsUrl"), prefix);
});

const runs = { fast: 0, write: 0, put: 0, lookup: 0, search: 0 };
/** Resolves in 30 s, or at once from the second call on: the first is the one a crash cuts short. */
const slowFirstTime = (count: number, signal: AbortSignal, output: string) =>
  new Promise<{ ok: true; output: string }>((resolve) => {
    const timer = setTimeout(() => resolve({ ok: true, output }), count === 1 ? 30_000 : 0);
    signal.addEventListener("abort", () => clearTimeout(timer));
  });
const tools: Tool[] = [
  defineTool({
    name: "count_fast",
    description: "Counts.",
    effect: "read",
    parameters: z.object({}),
    execute: () => ({ ok: true, output: `counted ${++runs.fast}` }),
  }) as Tool,
  defineTool({
    name: "slow_write",
    description: "Writes slowly.",
    effect: "write",
    parameters: z.object({}),
    execute: (_args, { signal }) => slowFirstTime(++runs.write, signal, "written"),
  }) as Tool,
  defineTool({
    name: "slow_put",
    description: "Puts a whole value slowly; putting it twice is putting it once.",
    effect: "write",
    idempotent: true,
    parameters: z.object({}),
    execute: (_args, { signal }) => slowFirstTime(++runs.put, signal, `put, call ${runs.put}`),
  }) as Tool,
  // Reads that another program carries out (as an MCP server's are), counting each call it gets.
  defineTool({
    name: "remote_lookup",
    description: "Looks up, remotely.",
    effect: "read",
    remote: true,
    parameters: z.object({}),
    execute: () => ({ ok: true, output: `looked up ${++runs.lookup}` }),
  }) as Tool,
  defineTool({
    name: "remote_search",
    description: "Searches slowly, remotely.",
    effect: "read",
    remote: true,
    parameters: z.object({}),
    execute: (_args, { signal }) => slowFirstTime(++runs.search, signal, `searched ${runs.search}`),
  }) as Tool,
];
beforeEach(() => Object.assign(runs, { fast: 0, write: 0, put: 0, lookup: 0, search: 0 }));

async function runtime(extra: Tool[] = [], troupe: Record<string, unknown> = {}) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      ...troupe,
    },
    [
      {
        name: "worker",
        description: "Works.",
        tools: [
          "count_fast",
          "slow_write",
          "slow_put",
          "remote_lookup",
          "remote_search",
          ...extra.map((tool) => tool.name),
        ],
      },
    ],
  );
  const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  return {
    rt: await new Runtime({ config, workspace: ws, env: {}, tools: [...tools, ...extra], bus }).open(),
    bus,
  };
}

it("resumes an agent on another host from its KV snapshot: a read is run again, an interrupted write is reported as outcome unknown and not run again", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "count_fast", arguments: {} },
          { name: "slow_write", arguments: {} },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "carried on after the move" } },
  );
  const first = await runtime();
  const handle = first.rt.start({ task: "Count, then write", approval: "yolo" });
  for await (const { envelope } of first.bus.eventLog.read({ runId: handle.runId, follow: true })) {
    if (envelope.type === "tool.started" && (envelope.data as { name: string }).name === "slow_write") break;
  }
  // The first host goes away in the middle of the write.
  handle.detach();
  await first.rt.close();
  await first.bus.close();
  expect(runs).toEqual({ fast: 1, write: 1, put: 0, lookup: 0, search: 0 });

  const second = await runtime();
  const resumed = await second.rt.resume(handle.runId, handle.agentId, { as: "own-record" });
  if (!resumed) throw new Error("nothing to resume");
  const output = await resumed.done;
  expect(output).toMatchObject({ reason: "done", result: "carried on after the move", turns: 2 });
  // Reads are not journaled: the batch's read runs again, the write does not.
  expect(runs).toEqual({ fast: 2, write: 1, put: 0, lookup: 0, search: 0 });
  const toolResults =
    server.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content) ?? [];
  expect(toolResults[0]).toContain("counted 2");
  expect(toolResults[1]).toContain("slow_write was running when its host stopped; its outcome is unknown");

  // One agent, one gap-free sequence of events across both hosts.
  const events: Envelope[] = (await collect(second.bus.eventLog.read({ runId: handle.runId }))).map(
    (e) => e.envelope,
  );
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
  expect(events.filter((e) => e.type === "agent.started")).toHaveLength(1);
  expect(events.at(-1)?.type).toBe("agent.stopped");
  // A finished agent is not resumed again.
  expect(await second.rt.resume(handle.runId, handle.agentId, { as: "own-record" })).toBeUndefined();
  await second.rt.close();
  await second.bus.close();
});

it("makes a remote read at most once across hosts: one finished is not made again, one cut short is of unknown outcome", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "count_fast", arguments: {} },
          { name: "remote_lookup", arguments: {} },
          { name: "remote_search", arguments: {} },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "carried on after the move" } },
  );
  const first = await runtime();
  const handle = first.rt.start({ task: "Count, look up, search" });
  const finished = new Set<string>();
  for await (const { envelope } of first.bus.eventLog.read({ runId: handle.runId, follow: true })) {
    if (envelope.type === "tool.finished") finished.add((envelope.data as { name: string }).name);
    if (finished.has("count_fast") && finished.has("remote_lookup")) break;
  }
  // The first host goes away while the search is still out.
  handle.detach();
  await first.rt.close();
  await first.bus.close();
  expect(runs).toMatchObject({ fast: 1, lookup: 1, search: 1 });

  const second = await runtime();
  const resumed = await second.rt.resume(handle.runId, handle.agentId, { as: "own-record" });
  if (!resumed) throw new Error("nothing to resume");
  expect(await resumed.done).toMatchObject({ reason: "done", result: "carried on after the move" });
  // The local read runs again; the remote program is asked nothing more.
  expect(runs).toMatchObject({ fast: 2, lookup: 1, search: 1 });
  const toolResults =
    server.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content) ?? [];
  expect(toolResults[0]).toContain("counted 2");
  expect(toolResults[1]).toContain("looked up 1");
  expect(toolResults[2]).toContain("remote_search was running when its host stopped; its outcome is unknown");
  await second.rt.close();
  await second.bus.close();
});

it("keeps a resumed agent's wall: counting the time it had used, it stops at the wall's grace", async () => {
  // Every answer is slow: only the wall ends this run.
  server.script({ reply: { text: "too slow", delayMs: 10_000 }, times: 4 });
  const wall = { defaults: { budget: { maxWallMs: 1500 } } };
  const first = await runtime([], wall);
  const handle = first.rt.start({ task: "Think slowly" });
  for await (const { envelope } of first.bus.eventLog.read({ runId: handle.runId, follow: true })) {
    if (envelope.type === "context.usage") break;
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  handle.detach();
  await first.rt.close();
  await first.bus.close();

  const second = await runtime([], wall);
  const resumedAt = Date.now();
  const resumed = await second.rt.resume(handle.runId, handle.agentId, { as: "own-record" });
  if (!resumed) throw new Error("nothing to resume");
  const output = await resumed.done;
  // 1500 ms and 150 of grace, less the 300 and more it had used: under 1.35 s; the bound leaves room.
  expect(Date.now() - resumedAt).toBeLessThan(3000);
  expect(output).toMatchObject({ reason: "budget_exhausted", limit: "maxWallMs 1500" });
  // The soft wall came first: the last request asked for an answer without tools.
  expect(server.requests.at(-1)?.body.tools).toBeUndefined();
  await second.rt.close();
  await second.bus.close();
});

it("runs an interrupted call again when its tool declares itself idempotent", async () => {
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "slow_put", arguments: {} }] } },
    { match: { turn: 2 }, reply: { text: "put it" } },
  );
  const first = await runtime();
  const handle = first.rt.start({ task: "Put", approval: "yolo" });
  for await (const { envelope } of first.bus.eventLog.read({ runId: handle.runId, follow: true }))
    if (envelope.type === "tool.started") break;
  handle.detach();
  await first.rt.close();
  await first.bus.close();

  const second = await runtime();
  const resumed = await second.rt.resume(handle.runId, handle.agentId, { as: "own-record" });
  expect(await resumed?.done).toMatchObject({ reason: "done", result: "put it" });
  expect(runs.put).toBe(2);
  const toolResult = server.requests[1]?.body.messages.find((m) => m.role === "tool")?.content;
  expect(toolResult).toContain("put, call 2");
  expect(toolResult).not.toContain("outcome is unknown");
  await second.rt.close();
  await second.bus.close();
});

it("refuses a snapshot written by another version, with a clear message, rather than misread it", async () => {
  const { rt, bus } = await runtime();
  const kv = await bus.kv("snapshots");
  await kv.put("run-x.agent-y", { v: 1, machineVersion: 99, runId: "run-x", agentId: "agent-y" });
  await expect(rt.resume("run-x", "agent-y", { as: "own-record" })).rejects.toThrow(
    /^the snapshot of agent-y was written by another version of Troupe \(record v1, machine v99; this one reads v1\/v5\)$/,
  );
  await rt.close();
  await bus.close();
});

it("starts a call that writes only once the snapshot holding it is stored, however slow that write is", async () => {
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "checked_write", arguments: {}, id: "call_w" }] } },
    { match: { turn: 2 }, reply: { text: "checked" } },
  );
  const seen: string[] = [];
  const { rt, bus } = await runtime([
    defineTool({
      name: "checked_write",
      description: "Writes, after looking at what is stored of its agent.",
      effect: "write",
      parameters: z.object({}),
      execute: async (_args, { runId, agentId }) => {
        const stored = await (await bus.kv("snapshots")).get<{ snapshot: { value: string } }>(
          `${runId}.${agentId}`,
        );
        seen.push(JSON.stringify(stored?.value.snapshot.value));
        return { ok: true, output: "written" };
      },
    }) as Tool,
  ]);
  // Every snapshot write takes 300 ms: a host that ran the call before its snapshot was stored
  // would come back, after a crash, to the model call before it.
  const snapshots = await bus.kv("snapshots");
  const put = snapshots.put.bind(snapshots);
  snapshots.put = async (...args) => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    return put(...args);
  };
  const handle = rt.start({ task: "Write", approval: "yolo" });
  expect(await handle.done).toMatchObject({ reason: "done", result: "checked" });
  expect(seen).toEqual(['"executingTools"']);
  await rt.close();
  await bus.close();
});
