import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, beforeEach, inject } from "vitest";
import type { Bus } from "../../src/bus/bus.js";
import { LocalBus, type LocalBusOptions } from "../../src/bus/local-bus.js";
import { NatsBus, type NatsBusOptions } from "../../src/bus/nats-bus.js";
import { subjects, uniquePrefix } from "../../src/bus/subjects.js";
import type { Logger } from "../../src/log.js";

/** A bus under test, and a way to put raw bytes on its wire. */
export interface BusUnderTest {
  bus: Bus;
  /** Puts bytes on the wire as another client could, bypassing the bus's own encoding. */
  sendRaw(subject: string, bytes: Uint8Array): Promise<void>;
  /** Closes the bus and removes what it created on the server. */
  dispose(): Promise<void>;
}

export function localBus(options: LocalBusOptions = {}): BusUnderTest {
  const bus = new LocalBus({ prefix: uniquePrefix(), ...options });
  return {
    bus,
    sendRaw: async (subject, bytes) => bus.publishRaw(subject, bytes),
    dispose: () => bus.close(),
  };
}

export async function natsBus(options: Partial<NatsBusOptions> = {}): Promise<BusUnderTest> {
  const url = options.url ?? inject("natsUrl");
  const prefix = options.prefix ?? uniquePrefix();
  const bus = await NatsBus.connect({ ...options, url, prefix });
  let raw: NatsConnection | undefined;
  return {
    bus,
    async sendRaw(subject, bytes) {
      raw ??= await connect({ servers: url });
      raw.publish(subject, bytes);
      await raw.flush();
    },
    async dispose() {
      await bus.close();
      await raw?.close();
      await removePrefix(url, prefix);
    },
  };
}

/** Deletes the event stream and KV buckets a prefix made on a shared server. */
export async function removePrefix(url: string, prefix: string): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await jetstreamManager(nc);
    const stream = subjects(prefix).eventStream;
    for await (const name of jsm.streams.names()) {
      if (name === stream || name.startsWith(`KV_${prefix}_`)) await jsm.streams.delete(name);
    }
  } finally {
    await nc.close();
  }
}

/** Both buses, for `describe.each`: each `open` makes a fresh one, with a prefix of its own. */
export const bothBuses: Array<{ name: string; open: (log?: Logger) => Promise<BusUnderTest> }> = [
  { name: "LocalBus", open: async (log) => localBus(log ? { log } : {}) },
  { name: "NatsBus", open: (log) => natsBus(log ? { log } : {}) },
];

/** A fresh bus for each test of the suite, disposed after it; the function returns the current one. */
export function busPerTest(open: () => Promise<BusUnderTest>): () => BusUnderTest {
  let under: BusUnderTest | undefined;
  beforeEach(async () => {
    under = await open();
  });
  afterEach(async () => {
    await under?.dispose();
  });
  return () => under as BusUnderTest;
}
