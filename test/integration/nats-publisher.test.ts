import { JetStreamApiCodes, JetStreamApiError, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { BusClosedError } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { AckedPublisher, PublishTimeoutError } from "../../src/bus/nats-publisher.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { removePrefix } from "../support/buses.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

describe("AckedPublisher on a real nats-server", () => {
  const prefix = uniquePrefix();
  const stream = `PUB_${prefix}`;
  let nc: NatsConnection;

  beforeAll(async () => {
    nc = await connect({ servers: inject("natsUrl") });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: stream, subjects: [`${prefix}.stored.>`] });
    // Takes the message (so the server finds a responder) and never answers.
    nc.subscribe(`${prefix}.silent`, { callback: () => {} });
    await nc.flush();
  });

  afterAll(async () => {
    await (await jetstreamManager(nc)).streams.delete(stream);
    await nc.close();
  });

  it("acks publishes asked for together, stored in the order they were asked for", async () => {
    const publisher = new AckedPublisher(nc);
    const acks = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        publisher.publish(`${prefix}.stored.order`, encoder.encode(String(i))),
      ),
    );
    expect(acks.every((ack) => ack.stream === stream && !ack.duplicate)).toBe(true);
    const seqs = acks.map((ack) => ack.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    const jsm = await jetstreamManager(nc);
    const stored = await Promise.all(seqs.map((seq) => jsm.streams.getMessage(stream, { seq })));
    expect(stored.map((message) => decoder.decode(message?.data))).toEqual(
      Array.from({ length: 50 }, (_, i) => String(i)),
    );
    publisher.close();
  });

  it("stores a publish retried with the same msgID once", async () => {
    const publisher = new AckedPublisher(nc);
    const bytes = encoder.encode("once");
    const first = await publisher.publish(`${prefix}.stored.dedupe`, bytes, { msgID: "m-1" });
    const again = await publisher.publish(`${prefix}.stored.dedupe`, bytes, { msgID: "m-1" });
    expect(again).toEqual({ stream, seq: first.seq, duplicate: true });
    publisher.close();
  });

  it("refuses a compare-and-set against the wrong last sequence with JetStream's own error", async () => {
    const publisher = new AckedPublisher(nc);
    const subject = `${prefix}.stored.cas`;
    const { seq } = await publisher.publish(subject, encoder.encode("1"), { expectedLastSubjectSeq: 0 });
    await publisher.publish(subject, encoder.encode("2"), { expectedLastSubjectSeq: seq });
    const stale = await publisher
      .publish(subject, encoder.encode("3"), { expectedLastSubjectSeq: seq })
      .catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(JetStreamApiError);
    expect((stale as JetStreamApiError).code).toBe(JetStreamApiCodes.StreamWrongLastSequence);
    publisher.close();
  });

  it("rejects at once when no stream takes the subject, without waiting out the timeout", async () => {
    const publisher = new AckedPublisher(nc);
    await expect(
      publisher.publish(`${prefix}.nowhere`, encoder.encode("x"), { timeoutMs: 600_000 }),
    ).rejects.toThrow(/no responders/);
    publisher.close();
  });

  it("gives up on an ack that does not come within the timeout", async () => {
    const publisher = new AckedPublisher(nc);
    const failure = await publisher
      .publish(`${prefix}.silent`, encoder.encode("x"), { timeoutMs: 200 })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(PublishTimeoutError);
    publisher.close();
  });

  it("on close, rejects what waits for an ack and refuses what comes after", async () => {
    const publisher = new AckedPublisher(nc);
    const waiting = publisher.publish(`${prefix}.silent`, encoder.encode("x"), { timeoutMs: 600_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    publisher.close();
    await expect(waiting).rejects.toBeInstanceOf(BusClosedError);
    await expect(publisher.publish(`${prefix}.stored.late`, encoder.encode("x"))).rejects.toBeInstanceOf(
      BusClosedError,
    );
  });

  it("calls a connection closed under it a closed bus, which callers do not retry", async () => {
    const own = await connect({ servers: inject("natsUrl") });
    const publisher = new AckedPublisher(own);
    await own.close();
    await expect(publisher.publish(`${prefix}.stored.after`, encoder.encode("x"))).rejects.toBeInstanceOf(
      BusClosedError,
    );
    publisher.close();
  });
});

describe("the NATS event log on a closed bus", () => {
  it("refuses an append at once instead of retrying it until the append timeout", async () => {
    const prefix = uniquePrefix();
    const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix, appendTimeoutMs: 10_000 });
    try {
      await bus.close();
      const event = makeEnvelope({ runId: "r1", agentId: "a1", seq: 0, type: "tick", data: {} });
      await expect(bus.eventLog.append(event)).rejects.toBeInstanceOf(BusClosedError);
    } finally {
      await removePrefix(inject("natsUrl"), prefix);
    }
  });
});

describe("NATS KV on a closed bus", () => {
  // While the server is away, KV reads and writes are retried for up to 30 s; a bus closed here is
  // not away, and a daemon that stops with snapshot writes still going must not wait that out.
  it("refuses a put and a get at once instead of retrying them", async () => {
    const prefix = uniquePrefix();
    const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
    try {
      const kv = await bus.kv("state");
      await kv.put("k", { n: 1 });
      await bus.close();
      const soon = <T>(promise: Promise<T>) =>
        Promise.race([
          promise,
          new Promise<never>((_, reject) =>
            setTimeout(() => reject(new Error("still retrying after 2 s")), 2000).unref(),
          ),
        ]);
      await expect(soon(kv.put("k", { n: 2 }))).rejects.toBeInstanceOf(BusClosedError);
      await expect(soon(kv.get("k"))).rejects.toBeInstanceOf(BusClosedError);
    } finally {
      await removePrefix(inject("natsUrl"), prefix);
    }
  });
});
