import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterEach, expect, inject, it } from "vitest";
import { subjects } from "../../src/bus/subjects.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { type AckDroppingRelay, ackDroppingRelay } from "../support/ack-dropping-relay.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { waitFor } from "../support/wait.js";

let relay: AckDroppingRelay;
let under: BusUnderTest;
afterEach(async () => {
  await under.dispose();
  await relay.close();
});

/** How many messages the bus's event stream holds, as the server counts them. */
async function stored(prefix: string): Promise<number> {
  const nc = await connect({ servers: inject("natsUrl") });
  try {
    const info = await (await jetstreamManager(nc)).streams.info(subjects(prefix).eventStream);
    return info.state.messages;
  } finally {
    await nc.close();
  }
}

const event = (seq: number) =>
  makeEnvelope({ runId: "run-1", agentId: "lead", seq, type: "model.delta", data: { text: `${seq}` } });

it("events whose acks are lost on the way back are sent again, and each is stored once, in order", async () => {
  relay = await ackDroppingRelay(inject("natsUrl"));
  const prefix = `lostacks${process.pid}${Date.now().toString(36)}`;
  under = await natsBus({ url: relay.url, prefix, appendTimeoutMs: 1000 });
  const events = [event(0), event(1), event(2)];
  relay.drop(3);
  await under.bus.eventLog.appendAll(events);
  expect(relay.dropped()).toBe(3);
  expect(await stored(prefix)).toBe(3);
  const read: string[] = [];
  for await (const { envelope } of under.bus.eventLog.read({ runId: "run-1" })) read.push(envelope.id);
  expect(read).toEqual(events.map((e) => e.id));
});

it("an append whose ack is lost with its connection is sent again after the reconnect, and stored once", async () => {
  relay = await ackDroppingRelay(inject("natsUrl"));
  const prefix = `lostconn${process.pid}${Date.now().toString(36)}`;
  under = await natsBus({ url: relay.url, prefix, appendTimeoutMs: 10_000 });
  const sent = event(0);
  relay.drop(1);
  const appending = under.bus.eventLog.append(sent);
  await waitFor("the ack dropped", () => relay.dropped() === 1);
  // The connection goes with the ack: the append fails at the reconnect, long before its timeout,
  // and is sent again at once, a second attempt of the same append.
  relay.reset();
  const ack = await appending;
  expect(await stored(prefix)).toBe(1);
  expect(ack.duplicate).toBe(true);
  const read: string[] = [];
  for await (const { envelope } of under.bus.eventLog.read({ runId: "run-1" })) read.push(envelope.id);
  expect(read).toEqual([sent.id]);
});
