import { existsSync } from "node:fs";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterEach, expect, it } from "vitest";
import { decodeEnvelope, encodeEnvelope, makeEnvelope } from "../../src/events/envelope.js";
import { shellCoderDaemon } from "../support/embedded-daemon.js";

/* ATTACK (outside review): with the runs bucket full, runs.start told the client it failed, yet the
 * agent had started first and its command ran: a run with no record, which status, abort and resume
 * cannot find, and a client likely to start it again. Now no tool of a run runs before its record
 * is written (the agent makes its first model call meanwhile): a run whose record cannot be
 * written runs no command, is stopped, and is refused. */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
}, 60_000);

it("a runs.start whose record cannot be written is refused, and its agent never runs a command", async () => {
  const prefix = "rfull";
  const { h, model } = await shellCoderDaemon(
    prefix,
    { command: "echo ran >> ledger.txt", answer: "done" },
    cleanups,
  );
  await h.start();
  // The runs bucket as full as a long-lived daemon's can be: it takes no more keys.
  const jsm = await jetstreamManager(await h.connectAs("daemon", prefix));
  const stream = `KV_${prefix}_runs`;
  const info = await jsm.streams.info(stream);
  await jsm.streams.update(stream, { ...info.config, max_msgs: Math.max(1, info.state.messages) });
  if (info.state.messages === 0) {
    const js = (await h.connectAs("daemon", prefix)).request(`$KV.${prefix}_runs.filler`, "{}");
    await js;
  }

  const client = await h.connectAs("client", prefix);
  const reply = await client
    .request(
      `${prefix}.api.runs.start`,
      encodeEnvelope(
        makeEnvelope({
          runId: "new",
          agentId: "cli",
          seq: 0,
          type: "runs.start",
          data: { task: "append", approval: "auto-edit" },
        }),
      ),
      { timeout: 45_000 },
    )
    .then((msg) => decodeEnvelope(msg.data));
  expect(reply.type).toBe("error");
  await new Promise((r) => setTimeout(r, 3000));
  expect(existsSync(join(h.dir, "ledger.txt"))).toBe(false);
  // Its first model call, made while the record was being written, was its last: it was stopped.
  expect(model.requests.length).toBeLessThanOrEqual(1);
}, 90_000);
