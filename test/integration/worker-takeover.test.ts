import { afterEach, beforeEach, expect, it } from "vitest";
import type { Placement } from "../../src/actors/placement.js";
import { Runtime } from "../../src/actors/runtime.js";
import { Worker } from "../../src/actors/worker.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

let server: ScriptedModelServer;
let under: BusUnderTest;
beforeEach(async () => {
  server = await ScriptedModelServer.start([{ reply: { text: "scouted" } }]);
  under = await natsBus();
});
afterEach(async () => {
  await under.dispose();
  await server.close();
});

it("a worker taking over a subagent whose host died before its first snapshot starts it again from its spawn request, its events going on", async () => {
  const { bus } = under;
  const runId = "run-takeover";
  const childId = "scout-0123456789";
  // A worker placed the child, logged its first two events and died before its snapshot was stored.
  await (await bus.kv("workers")).put("worker-dead", { pid: 1, host: "gone", beats: 7 });
  const spawn = { runId, childId, parentId: "lead-x", name: "scout", task: "Look.", depth: 1, budget: {} };
  await (await bus.kv("actors")).put(`${runId}.${childId}`, {
    v: 1,
    worker: "worker-dead",
    spawn,
  } satisfies Placement);
  for (const [seq, type, data] of [
    [0, "agent.started", { name: "scout", model: "scripted", task: "Look.", budget: {}, depth: 1 }],
    [1, "state.changed", { from: "idle", to: "callingModel" }],
  ] as const)
    await bus.eventLog.append(makeEnvelope({ runId, agentId: childId, parentId: "lead-x", seq, type, data }));
  expect(await (await bus.kv("snapshots")).get(`${runId}.${childId}`)).toBeNull();

  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "scout", description: "Scouts.", readOnly: true, tools: ["read_file"] }],
  );
  const runtime = await new Runtime({ config, bus, workspace: process.cwd(), env: {} }).open();
  const worker = new Worker(runtime, silentLogger, { heartbeatMs: 100, deadAfterMs: 300 });
  await worker.start();
  try {
    const stopped = async () =>
      (await collect(bus.eventLog.read({ runId }))).some(
        ({ envelope }) => envelope.agentId === childId && envelope.type === "agent.stopped",
      );
    await waitFor("the child to stop", stopped, 10_000);
    const seqs = (await collect(bus.eventLog.read({ runId })))
      .filter(({ envelope }) => envelope.agentId === childId)
      .map(({ envelope }) => envelope.seq);
    // One gap-free sequence across both hosts.
    expect(seqs).toEqual(seqs.map((_, i) => i));
    const last = (await collect(bus.eventLog.read({ runId }))).at(-1)?.envelope;
    expect(last).toMatchObject({ type: "agent.stopped", data: { reason: "done", result: "scouted" } });
  } finally {
    await worker.stop();
    await runtime.close();
  }
});
