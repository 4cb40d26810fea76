import { readFileSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { mirroredStreams } from "../../src/bus/permissions.js";
import type { Role } from "../../src/config/roles.js";
import { runTroupe } from "../support/cli.js";
import { askingRun, shellCoderDaemon } from "../support/embedded-daemon.js";
import { waitFor } from "../support/wait.js";

/* ATTACK (the client's, approver's and observer's seeds, on the default embedded server): a get from
 * one of the people's copies, its reply subject `$JS.API.STREAM.PURGE.<copy>` or
 * `…STREAM.MSG.DELETE.<copy>`. The server sent the stored message to the people's own JetStream API
 * as a request no permission of the role's was checked against: the approvals copy was purged, went
 * blind to every later request (`troupe approvals`: "no approval waits"; a terminal never asked), and
 * stayed so across restarts; one record emptied the event log's copy. Now the copies refuse purges
 * and deletes of messages, and a copy deleted outright (a get's empty answer sent onto
 * `$JS.API.STREAM.DELETE.<copy>`) is made again by the daemon within seconds: the event log's whole
 * (a bucket's may stop at a key held only by a later revision on nats-server 2.9: nats-views.ts). */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

const PEOPLE: Role[] = ["client", "approver", "observer"];

it("a person's seed purges and deletes from none of the people's copies, a deleted event log copy comes back whole, and later approvals still reach every person", async () => {
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
    // Every person's tool reads the approvals copy.
    await waitFor(
      "troupe approvals lists it",
      async () => (await runTroupe([...cfg, "approvals"], { cwd: dir, env })).stdout.includes(run.callId),
      10_000,
    );
    const approve = await runTroupe([...cfg, "approve", run.callId, "--allow"], { cwd: dir, env });
    return { approved: approve.code, exit: await run.exit };
  };
  expect(await askedAndAllowed("first")).toEqual({ approved: 0, exit: 0 });

  const copies = mirroredStreams(prefix);
  const events = copies[0] as string;
  const reader = await h.connectAs("client", prefix);
  const hosts = await h.connectAs("daemon", prefix);
  const stateOf = async (nc: NatsConnection) => {
    const jsm = await jetstreamManager(nc);
    const states = await Promise.all(copies.map((copy) => jsm.streams.info(copy).then((info) => info.state)));
    return states.map(({ last_seq, messages }) => ({ last_seq, messages }));
  };
  /** Whether each copy holds what its stream in the hosts' account does: every message, none missed. */
  const inStep = async () => {
    const copied = await stateOf(reader).catch(() => undefined);
    return JSON.stringify(copied) === JSON.stringify(await stateOf(hosts));
  };
  await waitFor("the copies in step", inStep, 10_000);
  expect((await stateOf(reader))[0]?.messages).toBeGreaterThan(0);

  // A subject each copy holds, for a direct get of its last message.
  const jsm = await jetstreamManager(reader);
  const held = new Map<string, string>();
  for (const copy of copies) {
    const { state } = await jsm.streams.info(copy, { subjects_filter: ">" });
    const subject = Object.keys(state.subjects ?? {})[0];
    if (subject) held.set(copy, subject);
  }
  expect(held.has(events)).toBe(true);
  for (const role of PEOPLE) {
    const nc = await h.connectAs(role, prefix);
    for (const target of copies)
      for (const api of ["STREAM.PURGE", "STREAM.MSG.DELETE"]) {
        const reply = `$JS.API.${api}.${target}`;
        for (const [from, subject] of held) {
          nc.publish(`$JS.API.DIRECT.GET.${from}.${subject}`, "", { reply });
          for (const seq of [1, 2, 3])
            nc.publish(`$JS.API.STREAM.MSG.GET.${from}`, JSON.stringify({ seq }), { reply });
        }
      }
    await nc.flush();
  }
  await new Promise((resolve) => setTimeout(resolve, 1000));
  // Nothing purged, nothing deleted: each copy holds what its stream does.
  expect(await inStep()).toBe(true);

  // A get's empty answer (no such message) onto STREAM.DELETE deletes a copy outright: the daemon
  // makes the event log's again, whole, from its stream.
  const observer = await h.connectAs("observer", prefix);
  observer.publish(`$JS.API.DIRECT.GET.${events}.${prefix}.evt.none.none.none`, "", {
    reply: `$JS.API.STREAM.DELETE.${events}`,
  });
  await observer.flush();
  await waitFor("the event log's copy whole again", inStep, 15_000);
  expect(h.stderr()).toMatch(/made the people's copy of a stream again: it had been deleted/);

  // And a later approval reaches every person as before.
  expect(await askedAndAllowed("second")).toEqual({ approved: 0, exit: 0 });
  expect(readFileSync(join(dir, "made.txt"), "utf8")).toBe("ran\nran\n");
}, 120_000);
