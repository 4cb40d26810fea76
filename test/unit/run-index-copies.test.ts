import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { LocalKv } from "../../src/bus/local-kv.js";
import type { RunRecord } from "../../src/daemon/api.js";
import { RecordCopies } from "../../src/daemon/record-copies.js";
import { RunIndex } from "../../src/daemon/run-index.js";
import { memoryLogger } from "../../src/log.js";
import { RecordSeal } from "../../src/trust/record-seal.js";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const run = (runId: string, status: RunRecord["status"] = "running"): RunRecord => ({
  runId,
  agentId: `${runId}-a`,
  agent: "coder",
  task: "t",
  status,
  startedAt: 1,
});

function index() {
  const dir = join(mkdtempSync(join(tmpdir(), "troupe-copies-")), "run-records", "p");
  dirs.push(dir);
  const kv = new LocalKv("p_runs");
  const { log, records } = memoryLogger("warn");
  const warnings = () => records.filter((r) => /put back from its copies/.test(String(r.msg)));
  return { dir, kv, index: new RunIndex(kv, RecordSeal.ephemeral(), log, new RecordCopies(dir)), warnings };
}

it("keeps the bucket's sealed value as the run's copy, 0600 in a 0700 directory, and removes it with the run", async () => {
  const { dir, kv, index: runs } = index();
  await runs.put(run("r1"));
  const file = join(dir, "r1.json");
  expect(JSON.parse(readFileSync(file, "utf8"))).toEqual((await kv.get("r1"))?.value);
  expect(statSync(file).mode & 0o777).toBe(0o600);
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  await runs.remove("r1");
  expect(() => statSync(file)).toThrow();
  expect(await runs.get("r1")).toBeUndefined();
});

it("takes a record written over, or gone, from its copy and puts it back: get, list and held, one warning a call", async () => {
  const { kv, index: runs, warnings } = index();
  for (const id of ["r1", "r2", "r3"]) await runs.put(run(id, id === "r3" ? "done" : "running"));
  await kv.put("r1", { type: "io.nats.jetstream.api.v1.stream_info_response" });
  await kv.put("r2", { stream: "P_EVENTS", seq: 9 });
  expect((await runs.list()).runs.map((r) => r.runId)).toEqual(["r1", "r2", "r3"]);
  expect(warnings()).toHaveLength(1);
  expect(await runs.list()).toEqual({ runs: [run("r1"), run("r2"), run("r3", "done")] });
  expect(warnings()).toHaveLength(1);

  await kv.put("r3", "junk");
  expect(await runs.get("r3")).toEqual(run("r3", "done"));
  expect((await kv.get<{ seal?: string }>("r3"))?.value.seal).toBeDefined();

  // Gone from the bucket, its held mark left: a start finds it.
  await kv.forget("r1");
  await kv.put("held.r2", "junk");
  await kv.put("index.held", { since: 1 });
  expect((await runs.held()).map((r) => r.runId)).toEqual(["r1", "r2"]);
  expect(await runs.taken("r1")).toBe(true);
  expect(warnings()).toHaveLength(3);
});

it("a copy that is not this daemon's, or of another run, is no record", async () => {
  const { dir, kv, index: runs } = index();
  await runs.put(run("r1"));
  await runs.put(run("r2"));
  const other = new RunIndex(
    new LocalKv("q_runs"),
    RecordSeal.ephemeral(),
    memoryLogger().log,
    new RecordCopies(dir),
  );
  await other.put(run("r3"));
  // r1's copy now holds r2's record; r3's is sealed by another key.
  new RecordCopies(dir).write("r1", JSON.parse(readFileSync(join(dir, "r2.json"), "utf8")));
  await kv.put("r1", "junk");
  await kv.put("r3", "junk");
  expect(await runs.get("r1")).toBeUndefined();
  expect(await runs.get("r3")).toBeUndefined();
  expect((await runs.list()).skipped).toBe(2);
});
