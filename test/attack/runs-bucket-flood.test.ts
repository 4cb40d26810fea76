import { jetstreamManager } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { runTroupe } from "../support/cli.js";
import { embeddedDaemon, plainDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (worker seed: the one seed but the daemon's in the hosts' account; the people's roles land nothing there, test/attack/reply-subject-writes.test.ts): a stream API's reply sent onto keys of the runs bucket, 16,000 times in a
 * moment, and 5,000 junk `held.*` marks. The daemon read every key with a warning line each:
 * runs.list timed out, troupe status failed, and each start took seconds longer. Now runs.list reads
 * within its deadline and counts what it skipped in one line; start-up reads the marks in one sweep. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("16,000 junk run records and 5,000 junk held marks: troupe status answers, one warning a list, and the daemon starts again reading them in two sweeps", async () => {
  const prefix = "flood";
  const h = await plainDaemon(prefix, cleanups);
  await h.start();
  const nc = await h.connectAs("worker", prefix);
  const junk = (key: string) =>
    nc.publish(`$JS.API.STREAM.MSG.GET.${prefix.toUpperCase()}_EVENTS`, JSON.stringify({ seq: 1 }), {
      reply: `$KV.${prefix}_runs.${key}`,
    });
  for (let i = 0; i < 16_000; i++) junk(`run-junk${i}`);
  for (let i = 0; i < 5_000; i++) junk(`held.run-junk${i}`);
  await nc.flush();
  // Until the server has answered every get (each answer stored as a record).
  const jsm = await jetstreamManager(await h.connectAs("daemon", prefix));
  await waitFor(
    "the flood stored",
    async () => (await jsm.streams.info(`KV_${prefix}_runs`)).state.messages >= 21_000,
    30_000,
  );

  const status = await runTroupe([...h.cfg, "status", "--json"], { cwd: h.dir, env: h.env });
  expect(status.code, status.stderr).toBe(0);
  const shown = JSON.parse(status.stdout) as { runs: unknown[]; skipped?: number };
  expect(shown.runs).toEqual([]);
  const human = await runTroupe([...h.cfg, "status"], { cwd: h.dir, env: h.env });
  // All of them, or what the list read in its time: said in one line either way.
  expect(human.stdout).toMatch(
    /\n\(\d{4,5} records not of this daemon's skipped(; the runs bucket was not read whole in time)?\)\n/,
  );
  expect(
    h
      .stderr()
      .split("\n")
      .filter((line) => /did not seal/.test(line)).length,
  ).toBeLessThanOrEqual(2);

  // A start reads the marks and the records in two sweeps (not a get and a purge a mark, which took
  // seconds: how long it takes now is the bench's to say) and removes at most 100 stray marks.
  const marks = async () =>
    (await jsm.streams.info(`KV_${prefix}_runs`, { subjects_filter: `$KV.${prefix}_runs.held.>` })).state
      .subjects;
  const before = Object.keys((await marks()) ?? {}).length;
  await h.stop();
  await h.start();
  expect(before).toBe(5_000);
  expect(Object.keys((await marks()) ?? {}).length).toBe(4_900);
  expect(h.stderr()).toMatch(/held marks with no run record of this daemon's: released/);
}, 90_000);

it("a bucket holds a bounded number of keys: a flood past nats.kv.maxEntries is refused, not stored", async () => {
  const prefix = "bounded";
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\n  kv:\n    maxEntries: 500\n`,
      "config/agents/a.yaml": "name: a\ndescription: A.\n",
    },
    "http://127.0.0.1:9/v1",
    cleanups,
  );
  await h.start();
  const nc = await h.connectAs("worker", prefix);
  for (let i = 0; i < 2_000; i++)
    nc.publish(`$JS.API.STREAM.MSG.GET.${prefix.toUpperCase()}_EVENTS`, JSON.stringify({ seq: 1 }), {
      reply: `$KV.${prefix}_runs.run-junk${i}`,
    });
  await nc.flush();
  const jsm = await jetstreamManager(await h.connectAs("daemon", prefix));
  const stored = async () => (await jsm.streams.info(`KV_${prefix}_runs`)).state.messages;
  await waitFor("the bucket full", async () => (await stored()) >= 500, 20_000);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(await stored()).toBe(500);
  expect((await jsm.streams.info(`KV_${prefix}_journal`)).config.max_msgs).toBe(500);
  const status = await runTroupe([...h.cfg, "status"], { cwd: h.dir, env: h.env });
  expect(status.code, status.stderr).toBe(0);
}, 60_000);
