import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, TROUPE_BIN } from "../support/cli.js";
import { coderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (outside review, the worker's seed, on the default embedded server): the worker logs into
 * the hosts' account, where the runs bucket lives. It asked a stream's info or one of its messages
 * (the JetStream API its reads go by), or published to a subject a stream captures, with the reply
 * subject `$KV.<p>_runs.<runId>`: the server stored its answer (or PubAck) as that run's record, and
 * NATS 2.9 cannot limit the reply subjects a client names. The daemon found a record it had not
 * sealed and left the run out: after a restart the running run was not resumed, `troupe status` did
 * not list it, `troupe resume` said there was no such run, and the `troupe run` following it waited
 * for good. Now the daemon keeps a sealed copy of each record in its data dir, takes the run from it
 * and puts it back; a client following a run a restarted daemon does not know is told so, and ends. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

/** `troupe ARGS` against the daemon of `h`, followed until its agent calls the model: its output and stderr as they grow, and its exit. */
async function following(h: { dir: string; env: NodeJS.ProcessEnv; cfg: string[] }, args: string[]) {
  const client: ChildProcess = spawn(process.execPath, [TROUPE_BIN, ...h.cfg, ...args], {
    cwd: h.dir,
    env: h.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  cleanups.push(() => client.kill("SIGKILL"));
  let out = "";
  let err = "";
  client.stdout?.on("data", (c) => (out += c));
  client.stderr?.on("data", (c) => (err += c));
  const exit = new Promise<number | null>((r) => client.once("exit", r));
  await waitFor("the model called", () => out.includes('"to":"callingModel"'), 15_000);
  return { out: () => out, err: () => err, exit };
}

/**
 * A daemon whose model answers its first `slowCalls` calls after `delayMs` and every later one at
 * once, and a `troupe run --json` against it, in its model call: its run id, output, stderr and exit.
 */
async function slowRun(prefix: string, delayMs: number, slowCalls = 1) {
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { text: "slow answer", delayMs }, times: slowCalls },
    { match: { turn: 1 }, reply: { text: "done" }, times: 5 },
  ]);
  cleanups.push(() => model.close());
  const h = await coderDaemon(prefix, model.baseURL, cleanups);
  await h.start();
  const client = await following(h, ["run", "--json", "answer"]);
  const { runId } = JSON.parse(client.out().split("\n")[0] ?? "{}") as { runId: string };
  return { h, runId, ...client };
}

/**
 * With the worker's seed, the server stores its own replies as `runId`'s record and held mark: a
 * stream's info, one of its messages, and the ack of a publish to a bucket the worker may write.
 * Resolves once all six are stored.
 */
async function writeOver(worker: NatsConnection, daemon: NatsConnection, prefix: string, runId: string) {
  const jsm = await jetstreamManager(daemon);
  const runs = `KV_${prefix}_runs`;
  const before = (await jsm.streams.info(runs)).state.last_seq;
  const events = `${prefix.toUpperCase()}_EVENTS`;
  for (const key of [runId, `held.${runId}`]) {
    const reply = `$KV.${prefix}_runs.${key}`;
    worker.publish(`$JS.API.STREAM.INFO.${events}`, "", { reply });
    worker.publish(`$JS.API.STREAM.MSG.GET.${events}`, JSON.stringify({ seq: 1 }), { reply });
    worker.publish(`$KV.${prefix}_workers.junk`, "{}", { reply });
  }
  await worker.flush();
  await waitFor(
    "the replies stored",
    async () => (await jsm.streams.info(runs)).state.last_seq >= before + 6,
  );
  const stored = await jsm.streams.getMessage(runs, { last_by_subj: `$KV.${prefix}_runs.${runId}` });
  expect(stored?.string()).not.toContain('"seal"');
}

const statusOf = async (h: { cfg: string[]; dir: string; env: NodeJS.ProcessEnv }, runId: string) => {
  const status = await runTroupe([...h.cfg, "status", "--json"], { cwd: h.dir, env: h.env });
  expect(status.code, status.stderr).toBe(0);
  return (JSON.parse(status.stdout) as { runs: Array<{ runId: string; status: string }> }).runs.find(
    (run) => run.runId === runId,
  )?.status;
};

it("a running run whose record a worker's seed had written over is listed, resumed and finished after a restart, its client following throughout", async () => {
  const prefix = "wrr";
  const { h, runId, out, exit } = await slowRun(prefix, 10_000);
  const worker = await h.connectAs("worker", prefix);
  await writeOver(worker, await h.connectAs("daemon", prefix), prefix, runId);

  await h.stop();
  await h.start();
  expect(["running", "done"]).toContain(await statusOf(h, runId));
  expect(h.stderr()).toMatch(/put back from its copies/);
  expect(await exit).toBe(0);
  expect(out()).toMatch(/"type":"agent\.stopped".*"reason":"done".*"result":"done"/);
  expect(await statusOf(h, runId)).toBe("done");
}, 120_000);

it("a finished run whose record is written over is still the daemon's: troupe status lists it, troupe resume says it is done, before and after a restart", async () => {
  const prefix = "wrf";
  const { h, runId, exit } = await slowRun(prefix, 0);
  expect(await exit).toBe(0);
  const worker = await h.connectAs("worker", prefix);
  const daemon = await h.connectAs("daemon", prefix);

  await writeOver(worker, daemon, prefix, runId);
  expect(await statusOf(h, runId)).toBe("done");
  await writeOver(worker, daemon, prefix, runId);
  const resume = await runTroupe([...h.cfg, "resume", runId], { cwd: h.dir, env: h.env });
  expect(resume.stderr).toContain(`run ${runId} is done; nothing to resume`);

  await writeOver(worker, daemon, prefix, runId);
  await h.stop();
  await h.start();
  expect(await statusOf(h, runId)).toBe("done");
  // One warning line a read, however many records it put back.
  expect(h.stderr().match(/put back from its copies/g)).toHaveLength(1);
}, 120_000);

it("troupe run and troupe observe following a run that the restarted daemon has no record of are told so in one line and exit", async () => {
  const prefix = "wru";
  const { h, runId, err, exit } = await slowRun(prefix, 10_000);
  const observer = await following(h, ["observe", "--json", runId]);
  const worker = await h.connectAs("worker", prefix);
  await writeOver(worker, await h.connectAs("daemon", prefix), prefix, runId);
  // Killed, its server left running for the next daemon: the clients stay connected throughout.
  const killed = new Promise((resolve) => h.child()?.once("exit", resolve));
  h.kill();
  await killed;
  // Gone from the data dir too (a standby daemon on another host has none): nothing knows the run.
  rmSync(join(h.dir, ".data", "run-records", prefix, `${runId}.json`), { force: true });
  await h.start();
  for (const client of [{ exit, err }, observer]) {
    expect(await client.exit).toBe(1);
    expect(client.err()).toContain(`troupe: run ${runId}: the daemon restarted and has no record of it`);
  }
  expect(await statusOf(h, runId)).toBeUndefined();
}, 120_000);

it("troupe resume following a run that the restarted daemon has no record of is told so in one line and exits", async () => {
  const prefix = "wrs";
  const { h, runId, exit } = await slowRun(prefix, 10_000, 2);
  const abort = await runTroupe([...h.cfg, "abort", runId], { cwd: h.dir, env: h.env });
  expect(abort.code, abort.stderr).toBe(0);
  expect(await exit).toBe(130);
  const resume = await following(h, ["resume", "--json", runId]);
  const worker = await h.connectAs("worker", prefix);
  await writeOver(worker, await h.connectAs("daemon", prefix), prefix, runId);
  await h.stop();
  rmSync(join(h.dir, ".data", "run-records", prefix, `${runId}.json`), { force: true });
  await h.start();
  expect(await resume.exit).toBe(1);
  expect(resume.err()).toContain(`troupe: run ${runId}: the daemon restarted and has no record of it`);
}, 120_000);
