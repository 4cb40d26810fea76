import { expect, it } from "vitest";
import { LocalKv } from "../../src/bus/local-kv.js";
import type { RunRecord } from "../../src/daemon/api.js";
import { RunIndex } from "../../src/daemon/run-index.js";
import { RUN_RECORD_MIGRATIONS, RUN_RECORD_VERSION } from "../../src/daemon/run-record-migrations.js";
import { memoryLogger } from "../../src/log.js";
import { RecordSeal } from "../../src/trust/record-seal.js";

const run = (runId: string, status: RunRecord["status"] = "running"): RunRecord => ({
  runId,
  agentId: `${runId}-a`,
  agent: "coder",
  task: "t",
  status,
  startedAt: 1,
});

function index() {
  const kv = new LocalKv("p_runs");
  const seal = RecordSeal.ephemeral();
  const { log, records } = memoryLogger("warn");
  const said = (pattern: RegExp) => records.filter((r) => pattern.test(String(r.msg)));
  return { kv, seal, index: new RunIndex(kv, seal, log), said };
}

it("writes each record with its version, sealed, and gives it back without", async () => {
  const { kv, seal, index: runs } = index();
  await runs.put(run("r1"));
  const stored = (await kv.get("r1"))?.value;
  expect(seal.open(stored)).toMatchObject({ v: RUN_RECORD_VERSION, runId: "r1" });
  expect(await runs.get("r1")).toEqual(run("r1"));
});

it("reads a record written before records named their version as version 1", async () => {
  expect(RUN_RECORD_MIGRATIONS).toEqual([]);
  const { kv, seal, index: runs } = index();
  await kv.put("r1", seal.seal(run("r1")));
  expect(await runs.get("r1")).toEqual(run("r1"));
  expect((await runs.list()).runs).toEqual([run("r1")]);
});

it("leaves out a record of a version this build does not read, says so in one line a call, and keeps its held mark", async () => {
  const { kv, seal, index: runs, said } = index();
  await runs.put(run("r1"));
  await kv.put("r2", seal.seal({ v: 99, ...run("r2") }));
  await kv.put("r3", seal.seal({ v: 99, ...run("r3") }));
  await kv.put("held.r2", {});
  const unread = () => said(/of a version this Troupe does not read/);

  expect(await runs.list()).toEqual({ runs: [run("r1")] });
  expect(unread()).toHaveLength(1);
  expect(unread()[0]).toMatchObject({ runs: 2, why: "v99; this one reads v1" });
  expect(said(/did not seal/)).toHaveLength(0);

  expect(await runs.get("r2")).toBeUndefined();
  expect(unread()).toHaveLength(2);
  expect(await runs.taken("r2")).toBe(true);

  await kv.put("index.held", { since: 1 });
  expect((await runs.held()).map((r) => r.runId)).toEqual(["r1"]);
  expect(await kv.get("held.r2")).not.toBeNull();
  expect(said(/held marks with no run record/)).toHaveLength(0);
});

it("checks the seal on the record as stored, before its version: a version changed under the seal is no record", async () => {
  const { kv, index: runs, said } = index();
  await runs.put(run("r1"));
  const stored = (await kv.get<Record<string, unknown>>("r1"))?.value;
  await kv.put("r1", { ...stored, v: 99 });
  expect(await runs.list()).toEqual({ runs: [], skipped: 1 });
  expect(said(/did not seal/)).toHaveLength(1);
  expect(said(/does not read/)).toHaveLength(0);
});
