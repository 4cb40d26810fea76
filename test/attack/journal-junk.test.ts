import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runToCommand, shellCoderDaemon } from "../support/embedded-daemon.js";

/* ATTACK (worker seed; an observer's write lands nowhere now, test/attack/reply-subject-writes.test.ts): "a finished write or command is never run again" (at most once, with notice).
 * Someone with a seed has the server write a stream API's JSON reply over the journal entry of a command
 * while it runs (STREAM.MSG.GET on the event stream, its reply subject the entry's key). The daemon
 * dies during the command; the next one found no journal entry it could read and ran the command
 * again. What is under a call's key and is not an entry now counts as a start of unknown outcome. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a command cut short by a crash is not run again, whatever a worker's seed wrote over its journal entry", async () => {
  const prefix = "atk";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo ran >> ledger.txt; sleep 6", answer: "done" },
    cleanups,
  );
  await h.start();
  const { runId, agentId, exit } = await runToCommand(h, cleanups);

  const nc = await h.connectAs("worker", prefix);
  nc.publish(`$JS.API.STREAM.MSG.GET.${prefix.toUpperCase()}_EVENTS`, JSON.stringify({ seq: 1 }), {
    reply: `$KV.${prefix}_journal.${runId}.${agentId}.call_1_0`,
  });
  await nc.flush();
  await new Promise((r) => setTimeout(r, 300));

  h.kill();
  await h.start();
  await exit;
  expect(readFileSync(join(h.dir, "ledger.txt"), "utf8")).toBe("ran\n");
}, 90_000);
