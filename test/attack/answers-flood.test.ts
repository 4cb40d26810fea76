import { jetstreamManager } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { BUCKET_VALUE_BYTES } from "../../src/bus/nats-streams.js";
import type { Role } from "../../src/config/roles.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review, the client's and approver's seeds, on the default embedded server): the
 * answers bucket, which those roles write blind, was bounded by a number of keys only, and every
 * value could be the server's largest message (1 MiB): 100,000 of them, more than the server's store,
 * and once the store was full no run could start, across restarts. Now a value past 16 KiB is
 * refused, and the bucket holds at most 10,000: what a seed can put there is bounded (160 MiB). */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a client's or an approver's oversized answers are refused by the server, and nothing of them is stored", async () => {
  const prefix = "afl";
  const h = await embeddedDaemon(
    { "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultModel: scripted\n` },
    "http://127.0.0.1:9/v1",
    cleanups,
  );
  await h.start();
  const big = "x".repeat(200_000);
  for (const role of ["client", "approver"] as Role[]) {
    const nc = await h.connectAs(role, prefix);
    for (let i = 0; i < 5; i++) {
      // As a person's role writes an answer: a request on the key's subject, the ack its reply.
      const reply = await nc
        .request(`$KV.${prefix}_answers.run-x.lead.c${i}.${role}.r.a${i}`, big, { timeout: 5000 })
        .then((msg) => new TextDecoder().decode(msg.data))
        .catch((error: Error) => `no ack: ${error.message}`);
      expect(reply).toMatch(/"error"|no ack/);
    }
    // A small one still goes in: answers are not shut off, only bounded.
    const small = await nc.request(`$KV.${prefix}_answers.run-x.lead.small.${role}.r.a`, "{}", {
      timeout: 5000,
    });
    expect(new TextDecoder().decode(small.data)).not.toMatch(/"error"/);
  }
  const jsm = await jetstreamManager(await h.connectAs("daemon", prefix));
  const info = await jsm.streams.info(`KV_${prefix}_answers`);
  expect(info.config.max_msg_size).toBe(BUCKET_VALUE_BYTES.answers);
  expect(info.config.max_msgs).toBe(10_000);
  expect(info.state.messages).toBe(2);
  expect(info.state.bytes).toBeLessThan(10_000);

  // A second review: 10,000 small junk answers filled the bucket, and every real answer after them
  // was refused, for good. The oldest now go: the last answer is still taken.
  const approver = await h.connectAs("approver", prefix);
  const ack = (key: string) =>
    approver
      .request(`$KV.${prefix}_answers.${key}`, "{}", { timeout: 10_000 })
      .then((msg) => new TextDecoder().decode(msg.data));
  for (let batch = 0; batch < 21; batch++)
    await Promise.all(Array.from({ length: 500 }, (_, i) => ack(`run-j.lead.c${batch}-${i}.r.a`)));
  expect(await ack("run-real.lead.c1.r.a")).not.toMatch(/"error"/);
  const full = await jsm.streams.info(`KV_${prefix}_answers`);
  expect(full.state.messages).toBe(10_000);
  expect(
    await jsm.streams.getMessage(`KV_${prefix}_answers`, {
      last_by_subj: `$KV.${prefix}_answers.run-real.lead.c1.r.a`,
    }),
  ).toBeTruthy();
}, 120_000);
