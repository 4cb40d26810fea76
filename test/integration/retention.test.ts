import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { Bus } from "../../src/bus/bus.js";
import type { RunRecord } from "../../src/daemon/api.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { RecordSeal } from "../../src/trust/record-seal.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
let under: BusUnderTest;
const closing: Array<() => Promise<void>> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "notes.txt": "hello\n" }));
  under = await natsBus();
});
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  await under.dispose();
  await server.close();
  dispose();
});

const seal = RecordSeal.ephemeral();

async function daemon(keepFinishedMs: number, keepRecordsMs?: number): Promise<Daemon> {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "writer", description: "Writes.", tools: ["read_file", "write_file"] }],
  );
  const runtime = await new Runtime({ config, bus: under.bus, workspace: ws, env: {} }).open();
  const daemon = new Daemon(runtime, silentLogger, {
    seal,
    keepFinishedMs,
    ...(keepRecordsMs === undefined ? {} : { keepRecordsMs }),
  });
  await daemon.start();
  closing.push(async () => {
    await daemon.stop();
    await runtime.close();
  });
  return daemon;
}

async function api<T>(bus: Bus, verb: string, data: unknown): Promise<T> {
  const reply = await bus.request(
    bus.subjects.api(verb),
    makeEnvelope({ runId: "test", agentId: "test", seq: 0, type: verb, data }),
  );
  return reply.data as T;
}

/** Starts a run that reads a file and writes one, and waits for it to finish. */
async function finishedRun(): Promise<string> {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "read_file", arguments: { path: "notes.txt" } },
          { name: "write_file", arguments: { path: "out.txt", content: "written\n" } },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "wrote it" } },
  );
  const { runId } = await api<{ runId: string }>(under.bus, "runs.start", {
    task: "Copy",
    approval: "auto-edit",
  });
  await waitFor(
    "the run done",
    async () => (await api<RunRecord>(under.bus, "runs.get", { runId })).status === "done",
  );
  return runId;
}

const stateKeys = async (bus: Bus, runId: string) => ({
  snapshots: await (await bus.kv("snapshots")).keys(`${runId}.>`),
  journal: await (await bus.kv("journal")).keys(`${runId}.>`),
});

it("removes a finished run's snapshots and journal after daemon.keepFinished, markers and all; its record and events stay", async () => {
  await daemon(1500);
  const runId = await finishedRun();
  const kept = await stateKeys(under.bus, runId);
  expect(kept.snapshots).toHaveLength(1);
  // The write is journaled; the read is not (it is run again if it must be).
  expect(kept.journal).toHaveLength(1);
  expect(
    (await (await under.bus.kv("journal")).get<{ name: string }>(kept.journal[0] as string))?.value.name,
  ).toBe("write_file");

  await waitFor(
    "its state removed",
    // The held mark goes last, once the state is removed.
    async () => (await (await under.bus.kv("runs")).keys("held.*")).length === 0,
    10_000,
  );
  expect(await stateKeys(under.bus, runId)).toEqual({ snapshots: [], journal: [] });
  // Nothing at all is left under the run in those buckets: no deletion markers to purge.
  for (const bucket of ["snapshots", "journal", "actors"] as const)
    expect(await (await under.bus.kv(bucket)).forget(`${runId}.>`)).toBe(0);
  expect(await (await under.bus.kv("runs")).keys("held.*")).toEqual([]);

  const record = await api<RunRecord>(under.bus, "runs.get", { runId });
  expect(record).toMatchObject({ status: "done", result: "wrote it" });
  const events = await collect(under.bus.eventLog.read({ runId }));
  expect(events.map((e) => e.envelope.type)).toContain("agent.stopped");
  const listed = await api<{ runs: RunRecord[] }>(under.bus, "runs.list", {});
  expect(listed.runs.map((run) => run.runId)).toEqual([runId]);
});

it("keeps a finished run's state across a daemon restart until its time, then the next daemon removes it", async () => {
  const first = await daemon(3_600_000);
  const runId = await finishedRun();
  await first.stop();
  expect((await stateKeys(under.bus, runId)).snapshots).toHaveLength(1);
  expect(await (await under.bus.kv("runs")).keys("held.*")).toEqual([`held.${runId}`]);

  // The next daemon keeps finished runs for no time: what the first left held is removed on start.
  await daemon(0);
  await waitFor(
    "its state removed",
    // The held mark goes last, once the state is removed.
    async () => (await (await under.bus.kv("runs")).keys("held.*")).length === 0,
    10_000,
  );
  expect(await (await under.bus.kv("runs")).keys("held.*")).toEqual([]);
  expect(await api<RunRecord>(under.bus, "runs.get", { runId })).toMatchObject({ status: "done" });
});

it("resumes on start the runs an older daemon left running, from a bucket without held marks", async () => {
  server.script(
    { match: { turn: 1 }, reply: { text: "first host's answer", delayMs: 60_000 } },
    { match: { turn: 1 }, reply: { text: "finished after the restart" } },
  );
  const first = await daemon(0);
  const { runId } = await api<{ runId: string }>(under.bus, "runs.start", { task: "Wait" });
  await waitFor("the model called", () => server.requests.length === 1);
  await first.stop();
  // As a daemon from before held marks left the bucket: records only.
  await (await under.bus.kv("runs")).forget("index.held");
  await (await under.bus.kv("runs")).forget("held.*");

  await daemon(0);
  await waitFor(
    "the run done",
    async () => (await api<RunRecord>(under.bus, "runs.get", { runId })).status === "done",
  );
  expect(await api<RunRecord>(under.bus, "runs.get", { runId })).toMatchObject({
    result: "finished after the restart",
  });
});

it("removes a finished run's record after nats.kv.ttl, its events staying; a daemon that starts finds it held until then", async () => {
  const first = await daemon(0, 3_600_000);
  const runId = await finishedRun();
  await waitFor("its state removed", async () => (await stateKeys(under.bus, runId)).snapshots.length === 0);
  // The state is gone, the record is not: the run stays held, for the next daemon to find.
  expect(await (await under.bus.kv("runs")).keys("held.*")).toEqual([`held.${runId}`]);
  await first.stop();

  await daemon(0, 1500);
  await waitFor(
    "its record removed",
    async () => (await (await under.bus.kv("runs")).keys()).length <= 1,
    10_000,
  );
  expect(await (await under.bus.kv("runs")).keys()).toEqual(["index.held"]);
  await expect(api(under.bus, "runs.get", { runId })).rejects.toThrow(/no run/i);
  expect((await api<{ runs: RunRecord[] }>(under.bus, "runs.list", {})).runs).toEqual([]);
  const events = await collect(under.bus.eventLog.read({ runId }));
  expect(events.map((e) => e.envelope.type)).toContain("agent.stopped");
});

it("a burst of runs.list shares one sweep of the runs bucket at a time: a reader's flood is not one sweep a request", async () => {
  const d = await daemon(60_000);
  const runs = await under.bus.kv("runs");
  const values = runs.values.bind(runs);
  let sweeps = 0;
  runs.values = (pattern, options) => {
    if (pattern === "*") sweeps++;
    return values(pattern, options);
  };
  const answers = await Promise.all(Array.from({ length: 200 }, () => d.request("runs.list", {})));
  expect(answers.every((answer) => Array.isArray((answer as { runs: unknown[] }).runs))).toBe(true);
  expect(sweeps).toBeGreaterThan(0);
  expect(sweeps).toBeLessThan(20);
});
