import { readFileSync } from "node:fs";
import { join } from "node:path";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { headers } from "@nats-io/transport-node";
import { afterEach, expect, it } from "vitest";
import { hostsStreams, runToCommand, shellCoderDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review H, the worker's seed, on the default embedded server): the worker lives in
 * the hosts' account, beside every stream. It stored a value with a `Nats-Request-Info` header of
 * its own (`{"acc":"<p>_hosts"}`, the header JetStream's API takes a request by) in a bucket it may
 * write, then asked a direct get of it with the reply subject `$JS.API.STREAM.PURGE.<stream>` (or
 * DELETE, UPDATE, CREATE): the server sent the stored message, headers and all, there, and JetStream
 * carried it out as the hosts' account's request. The runs bucket purged, the event log deleted or
 * sealed, a stream made on the API's subjects: runs lost, every troupe run failing, across restarts.
 * No role but the daemon's may now ask a direct get or make a consumer (which also sends a stored
 * message where its requester says); the API's own gets answer in JSON of their own. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a worker's seed has the server purge, delete or change no stream, whatever it stores and wherever it aims a get", async () => {
  const prefix = "wad";
  const { h } = await shellCoderDaemon(
    prefix,
    { command: "echo ran >> ledger.txt", answer: "done" },
    cleanups,
  );
  await h.start();
  const first = await runToCommand(h, cleanups);
  expect(await first.exit).toBe(0);

  const stateOf = await hostsStreams(h, prefix);
  const before = await stateOf();
  expect(before.every((s) => s.messages >= 0)).toBe(true);

  const worker = await h.connectAs("worker", prefix);
  const forged = headers();
  forged.set("Nats-Request-Info", JSON.stringify({ acc: `${prefix}_hosts`, rtt: "1ms" }));
  const bucket = `${prefix}_workers`;
  const key = `$KV.${bucket}.zz${Date.now()}`;
  // Stored, with its header: the worker may write this bucket.
  await worker.request(key, "", { headers: forged, timeout: 5000 });
  const targets = [`KV_${prefix}_runs`, `${prefix.toUpperCase()}_EVENTS`, `KV_${prefix}_approvals`];
  for (const target of targets)
    for (const verb of ["PURGE", "DELETE", "MSG.DELETE"]) {
      const reply = `$JS.API.STREAM.${verb}.${target}`;
      worker.publish(`$JS.API.DIRECT.GET.KV_${bucket}.${key}`, "", { reply });
      worker.publish(`$JS.API.DIRECT.GET.KV_${bucket}`, JSON.stringify({ last_by_subj: key }), { reply });
      worker.publish(`$JS.API.STREAM.MSG.GET.KV_${bucket}`, JSON.stringify({ last_by_subj: key }), { reply });
      const config = {
        deliver_subject: reply,
        ack_policy: AckPolicy.None,
        deliver_policy: DeliverPolicy.LastPerSubject,
        filter_subject: key,
      };
      worker.publish(
        `$JS.API.CONSUMER.CREATE.KV_${bucket}`,
        JSON.stringify({ stream_name: `KV_${bucket}`, config }),
      );
    }
  await worker.flush();
  await new Promise((resolve) => setTimeout(resolve, 1500));

  const after = await stateOf();
  for (const [i, stream] of before.entries()) {
    expect(after[i]?.messages, stream.name).toBeGreaterThanOrEqual(stream.messages);
    expect(after[i]?.sealed, stream.name).toBe(false);
  }
  // The next run goes as the first did.
  const second = await runToCommand(h, cleanups);
  expect(await second.exit).toBe(0);
  expect(readFileSync(join(h.dir, "ledger.txt"), "utf8")).toBe("ran\nran\n");
}, 120_000);
