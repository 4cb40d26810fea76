import { readFileSync } from "node:fs";
import { join } from "node:path";
import { AckPolicy, DeliverPolicy, jetstreamManager } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { KV_BUCKETS } from "../../src/bus/permissions.js";
import type { Role } from "../../src/config/roles.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { embeddedDaemon, runToCommand } from "../support/embedded-daemon.js";

/* ATTACK (the client's, approver's and observer's seeds, on the default embedded server): the server
 * is asked to send what it stores onto subjects of Troupe's state. A stream API's answer (a get, a
 * direct get) with a bucket key as its reply subject was written over that key, the snapshot of a
 * running agent included (after a restart the run could never be resumed); a consumer whose deliver
 * subject is a key did the same for every message of the stream. Now those roles live in an account
 * of their own, with no JetStream, that imports only the hosts' streams' info and gets
 * (permissions.ts, accountsBlock): every reply subject they name resolves there, where no stream
 * stores anything, they may make no consumer, and the running run is resumed after a restart as if
 * nothing happened. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

const PEOPLE: Role[] = ["client", "approver", "observer"];
const prefix = "rsw";
/** The people's account's own JetStream API (not enabled there), and the hosts' streams' gets it imports. */
const APIS = ["$JS.API", `$JS.${prefix}_hosts.API`];

it("reply subjects and deliver subjects of a person's role write nothing into any bucket or the event log, and a running run resumes after a restart", async () => {
  const model = await ScriptedModelServer.start([
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "shell", arguments: { command: "echo ran >> ledger.txt; sleep 5" } }] },
      times: 10,
    },
    { match: { turn: 2 }, reply: { text: "all done" }, times: 10 },
  ]);
  cleanups.push(() => model.close());
  const h = await embeddedDaemon(
    {
      "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: coder\ndefaultModel: scripted\n`,
      "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [shell]\n",
    },
    model.baseURL,
    cleanups,
  );
  const { dir } = h;
  await h.start();
  const run = await runToCommand(h, cleanups);
  const { runId, agentId, exit } = run;

  const events = `${prefix.toUpperCase()}_EVENTS`;
  const keyOf = (bucket: string, role: Role) => `$KV.${prefix}_${bucket}.${runId}.${agentId}.${role}`;
  const forged = (role: Role) => `${prefix}.evt.${runId}.${role}.agent.stopped`;
  for (const role of PEOPLE) {
    const nc = await h.connectAs(role, prefix);
    for (const bucket of [...KV_BUCKETS, "runs"]) {
      // The same key as the agent's own snapshot, and one of the role's name in every bucket.
      const targets = [keyOf(bucket, role), `$KV.${prefix}_${bucket}.${runId}.${agentId}`];
      for (const reply of targets)
        for (const api of APIS) {
          nc.publish(`${api}.STREAM.MSG.GET.${events}`, JSON.stringify({ seq: 1 }), { reply });
          nc.publish(`${api}.DIRECT.GET.${events}`, JSON.stringify({ seq: 1 }), { reply });
        }
    }
    for (const api of APIS) {
      nc.publish(`${api}.STREAM.MSG.GET.${events}`, JSON.stringify({ seq: 1 }), { reply: forged(role) });
      // A push consumer of the whole event log, delivering onto the agent's snapshot key.
      const config = {
        deliver_subject: keyOf("snapshots", role),
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.All,
        inactive_threshold: 5_000_000_000,
      };
      nc.publish(`${api}.CONSUMER.CREATE.${events}`, JSON.stringify({ stream_name: events, config }));
    }
    await nc.flush();
  }
  await new Promise((r) => setTimeout(r, 500));

  // What the hosts' account holds, read as the daemon: nothing of any of those writes.
  const jsm = await jetstreamManager(await h.connectAs("daemon", prefix));
  for (const bucket of KV_BUCKETS) {
    for (const role of PEOPLE) {
      const info = await jsm.streams.info(`KV_${prefix}_${bucket}`, { subjects_filter: keyOf(bucket, role) });
      expect(Object.keys(info.state.subjects ?? {}), `${bucket} ${role}`).toEqual([]);
    }
    if (bucket === "snapshots") continue;
    const own = await jsm.streams.info(`KV_${prefix}_${bucket}`, {
      subjects_filter: `$KV.${prefix}_${bucket}.${runId}.${agentId}`,
    });
    expect(Object.keys(own.state.subjects ?? {}), bucket).toEqual([]);
  }
  const snapshot = await jsm.streams.getMessage(`KV_${prefix}_snapshots`, {
    last_by_subj: `$KV.${prefix}_snapshots.${runId}.${agentId}`,
  });
  // Still the agent's own snapshot (JSON of that agent), not a stream's answer or an event.
  const value = snapshot ? (snapshot.json() as { agentId?: string }) : undefined;
  expect(value?.agentId).toBe(agentId);
  for (const role of PEOPLE) {
    const forgedEvents = await jsm.streams.info(events, { subjects_filter: forged(role) });
    expect(Object.keys(forgedEvents.state.subjects ?? {}), role).toEqual([]);
  }

  // The daemon dies mid-command; the next one resumes the run from its snapshot, to the end.
  h.kill();
  await h.start();
  expect(await exit).toBe(0);
  expect(run.out()).toContain("all done");
  expect(readFileSync(join(dir, "ledger.txt"), "utf8")).toBe("ran\n");
}, 90_000);
