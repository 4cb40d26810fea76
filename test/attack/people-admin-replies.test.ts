import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { AckPolicy } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { accountNames, KV_BUCKETS, peopleReadStreams } from "../../src/bus/permissions.js";
import type { Role } from "../../src/config/roles.js";
import { runTroupe } from "../support/cli.js";
import { askingRun, hostsStreams, shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (the client's, approver's and observer's seeds, on the default embedded server): a stream's
 * answer aimed at a JetStream admin request. The people's account had read-only copies of the event
 * log and the approvals bucket, and JetStream of its own: a get whose reply subject was
 * `$JS.API.STREAM.PURGE.<copy>`, `…MSG.DELETE.<copy>` or `…STREAM.DELETE.<copy>` (an empty answer: a
 * get of a missing message, a consumer's heartbeat) had the server send it to that JetStream as a
 * request no permission of the role's was checked against. The approvals copy was emptied or deleted
 * and, made again on nats-server 2.9, could stop following for good: no terminal was asked again.
 * Now the people's account has no JetStream (its API answers "not enabled") and no copies: it reads
 * the hosts' streams through imported gets, whose answers come back to it, and may make no consumer.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

const PEOPLE: Role[] = ["client", "approver", "observer"];
const ADMIN = ["STREAM.PURGE", "STREAM.MSG.DELETE", "STREAM.DELETE"];

it("a person's seed has the server purge, delete from or delete no stream, and later approvals still reach every person", async () => {
  const prefix = "cad";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo ran >> made.txt", answer: "ran it" },
    cleanups,
  );
  const { dir, env, cfg } = h;
  await h.start();
  /** A run that asks to run its command, allowed by `troupe approve` once `troupe approvals` lists it. */
  const askedAndAllowed = async (task: string) => {
    const run = await askingRun(h, task, cleanups);
    await waitFor(
      "troupe approvals lists it",
      async () => (await runTroupe([...cfg, "approvals"], { cwd: dir, env })).stdout.includes(run.callId),
      10_000,
    );
    const approve = await runTroupe([...cfg, "approve", run.callId, "--allow"], { cwd: dir, env });
    return { approved: approve.code, exit: await run.exit };
  };
  expect(await askedAndAllowed("first")).toEqual({ approved: 0, exit: 0 });

  const stateOf = await hostsStreams(h, prefix);
  const streams = [`${prefix.toUpperCase()}_EVENTS`, ...KV_BUCKETS.map((name) => `KV_${prefix}_${name}`)];
  const before = await stateOf();
  expect(before.find((s) => s.name.endsWith("_EVENTS"))?.messages).toBeGreaterThan(0);

  const hostsApi = `$JS.${accountNames(prefix).hosts}.API`;
  const read = peopleReadStreams(prefix);
  for (const role of PEOPLE) {
    const nc = await h.connectAs(role, prefix);
    for (const api of ["$JS.API", hostsApi])
      for (const admin of ADMIN)
        for (const target of streams) {
          const reply = `${api}.${admin}.${target}`;
          for (const from of read) {
            // A message that is there, and an empty answer: a direct get of one that is not.
            nc.publish(`${hostsApi}.STREAM.MSG.GET.${from}`, JSON.stringify({ seq: 1 }), { reply });
            nc.publish(`${hostsApi}.DIRECT.GET.${from}`, JSON.stringify({ seq: 1 }), { reply });
            nc.publish(`${hostsApi}.DIRECT.GET.${from}.${prefix}.evt.none.none.none`, "", { reply });
          }
          // A consumer whose heartbeats (empty) would be sent there.
          const config = { deliver_subject: reply, ack_policy: AckPolicy.None, idle_heartbeat: 100_000_000 };
          for (const from of read)
            nc.publish(`${api}.CONSUMER.CREATE.${from}`, JSON.stringify({ stream_name: from, config }));
        }
    await nc.flush();
  }
  await new Promise((resolve) => setTimeout(resolve, 1500));
  // Every stream of the hosts' account is there, and holds at least what it held.
  const after = await stateOf();
  for (const [i, stream] of before.entries())
    expect(after[i]?.messages, stream.name).toBeGreaterThanOrEqual(stream.messages);
  // And nothing of the people's account is stored anywhere: it has no JetStream.
  expect(existsSync(join(dir, ".data", "nats", "jetstream", accountNames(prefix).users))).toBe(false);

  // A later approval reaches every person as before.
  expect(await askedAndAllowed("second")).toEqual({ approved: 0, exit: 0 });
  expect(readFileSync(join(dir, "made.txt"), "utf8")).toBe("ran\nran\n");
}, 120_000);
