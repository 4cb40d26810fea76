import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { isEvent } from "../../src/events/agent-events.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { testConfig } from "../support/config.js";

/* ATTACK (an outside review, the worker's seed): a spawn request is a worker's to send, and one said
 * `depth: 0` with an agent whose YAML is yolo: the worker that took it started a top-level agent,
 * not read-only, and its shell ran unsandboxed. A resumed agent took its definition from its
 * snapshot's `name`, which a worker's seed can write: the run's first agent came back as `ops`. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function runtimeWith(model: ScriptedModelServer) {
  const dir = mkdtempSync(join(tmpdir(), "troupe-worker-seed-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
    },
    [
      { name: "reader", description: "Reads.", tools: ["read_file"] },
      { name: "ops", description: "Operates.", tools: ["shell", "read_file"], approval: "yolo" },
    ],
  );
  const bus = new LocalBus({ prefix: "seed" });
  const runtime = await new Runtime({ config, bus, workspace: dir, env: {} }).open();
  cleanups.push(() => runtime.close());
  return { runtime, bus, dir };
}

it("a spawn request saying depth 0 starts a subagent all the same: read-only, its shell writes nothing", async () => {
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command: "touch PWNED" } }] } },
    { match: { turn: 2 }, reply: { text: "done" } },
  ]);
  cleanups.push(() => model.close());
  const { runtime, bus, dir } = await runtimeWith(model);
  const runId = "run-01m8zzzzzzzzzzzzzzzzzzzzzz";
  const handle = runtime.spawnChild({
    runId,
    childId: "ops-evil1",
    parentId: "reader-nobody",
    name: "ops",
    task: "do the thing",
    depth: 0,
    budget: {},
  } as never);
  await handle.done;
  let depth: number | undefined;
  for await (const { envelope } of bus.eventLog.read({ runId }))
    if (isEvent(envelope, "agent.started")) depth = envelope.data.depth;
  expect(depth).toBe(1);
  expect(existsSync(join(dir, "PWNED"))).toBe(false);
});

it("a resumed run's first agent is the one its run record names, whatever its snapshot's name says", async () => {
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { text: "thinking", delayMs: 60_000 } },
    { match: { turn: 1 }, reply: { text: "resumed" } },
  ]);
  cleanups.push(() => model.close());
  const { runtime, bus } = await runtimeWith(model);
  const handle = runtime.start({ task: "summarize", agent: "reader" });
  const snapshots = await bus.kv("snapshots");
  const key = `${handle.runId}.${handle.agentId}`;
  for (let i = 0; i < 100 && !(await snapshots.get(key)); i++) await new Promise((r) => setTimeout(r, 20));
  handle.detach();
  // The worker's seed writes the record back naming another agent, one with a shell and yolo.
  const entry = await snapshots.get<Record<string, unknown>>(key);
  expect(entry).not.toBeNull();
  await snapshots.put(key, { ...entry?.value, name: "ops" });

  const resumed = await runtime.resume(handle.runId, handle.agentId, { as: { root: {}, agent: "reader" } });
  expect(await resumed?.done).toMatchObject({ reason: "done", result: "resumed" });
  const last = model.requests.at(-1)?.body;
  const offered = (last?.tools ?? []).map((t: { function: { name: string } }) => t.function.name);
  expect(offered).toEqual(["read_file"]);
  expect(String(last?.messages[0]?.content)).toContain('You are "reader"');
});
