import { jetstreamManager, StorageType } from "@nats-io/jetstream";
import { connect, millis, type NatsConnection, nanos } from "@nats-io/transport-node";
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { EVENT_STREAM_ENTRIES, type StorageSettings } from "../../src/bus/nats-streams.js";
import { subjects, uniquePrefix } from "../../src/bus/subjects.js";
import { memoryLogger } from "../../src/log.js";
import { removePrefix } from "../support/buses.js";

let prefix: string;
let nc: NatsConnection;
const url = () => inject("natsUrl");
beforeEach(async () => {
  prefix = uniquePrefix();
  nc = await connect({ servers: url() });
});
afterEach(async () => {
  await nc.close();
  await removePrefix(url(), prefix);
});

async function open(storage?: StorageSettings) {
  const { log, records } = memoryLogger("info");
  const bus = await NatsBus.connect({ url: url(), prefix, log, ...(storage ? { storage } : {}) });
  try {
    await bus.kv("runs");
  } finally {
    await bus.close();
  }
  return records.filter((r) => r.level === 40).map((r) => String(r.msg));
}

const streamOf = async (name: string) => (await (await jetstreamManager(nc)).streams.info(name)).config;

it("makes the event stream and the buckets as troupe.yaml's nats.stream and nats.kv say", async () => {
  const warnings = await open({
    stream: { maxAge: 3_600_000, maxBytes: 2 ** 20, storage: "memory" },
    kv: { replicas: 1 },
  });
  expect(warnings).toEqual([]);
  const events = await streamOf(subjects(prefix).eventStream);
  expect([millis(events.max_age), events.max_bytes, events.storage]).toEqual([
    3_600_000,
    2 ** 20,
    StorageType.Memory,
  ]);
  expect((await streamOf(`KV_${prefix}_runs`)).num_replicas).toBe(1);
});

it("changes an existing stream where troupe.yaml differs, and says in one line what it cannot change", async () => {
  await open(); // made with the defaults, as any role makes them
  expect((await streamOf(subjects(prefix).eventStream)).max_age).toBe(0);
  const warnings = await open({ stream: { maxAge: 60_000, maxBytes: 5 * 2 ** 20, storage: "memory" } });
  const events = await streamOf(subjects(prefix).eventStream);
  expect([millis(events.max_age), events.max_bytes]).toEqual([60_000, 5 * 2 ** 20]);
  expect(events.storage).toBe(StorageType.File);
  expect(warnings).toHaveLength(1);
  expect(warnings[0]).toBe(
    `stream ${subjects(prefix).eventStream}: storage is file, troupe.yaml's nats.stream.storage says memory: JetStream cannot change that in place; remove the stream (its data goes with it) or change troupe.yaml`,
  );
});

it("takes a stream an operator made as it is when troupe.yaml says nothing of it, and changes only what it says", async () => {
  const jsm = await jetstreamManager(nc);
  const name = subjects(prefix).eventStream;
  await jsm.streams.add({
    name,
    subjects: [subjects(prefix).events()],
    max_msgs: 1000,
    max_age: nanos(86_400_000),
    storage: StorageType.File,
  });
  expect(await open({})).toEqual([]);
  expect(await streamOf(name)).toMatchObject({ max_msgs: 1000, max_age: nanos(86_400_000) });
  await open({ stream: { maxBytes: 2 ** 20 } });
  expect(await streamOf(name)).toMatchObject({
    max_msgs: 1000,
    max_age: nanos(86_400_000),
    max_bytes: 2 ** 20,
  });
});

it("says in one line why a stream could not be made as troupe.yaml says (replicas on a server that is no cluster)", async () => {
  await expect(open({ kv: { replicas: 3 } })).rejects.toThrow(
    `could not make stream KV_${prefix}_runs as troupe.yaml's nats.kv says: replicas > 1 not supported in non-clustered mode`,
  );
});

it("bounds the event stream by default: made with EVENT_STREAM_ENTRIES, an unbounded one from before bounded, nats.stream.maxEntries taken", async () => {
  const jsm = await jetstreamManager(nc);
  const name = subjects(prefix).eventStream;
  // As an earlier Troupe made it: no count limit at all.
  await jsm.streams.add({ name, subjects: [subjects(prefix).events()], storage: StorageType.File });
  expect((await streamOf(name)).max_msgs).toBe(-1);
  expect(await open({})).toEqual([]);
  expect((await streamOf(name)).max_msgs).toBe(EVENT_STREAM_ENTRIES);
  await open({ stream: { maxEntries: 5000 } });
  expect((await streamOf(name)).max_msgs).toBe(5000);
  await jsm.streams.delete(name);
  await open(); // as any role makes it
  expect((await streamOf(name)).max_msgs).toBe(EVENT_STREAM_ENTRIES);
});
