import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
  type StreamInfo,
} from "@nats-io/jetstream";
import { millis, nanos } from "@nats-io/transport-node";
import type { KvSettings, StreamSettings } from "../config/schema.js";
import type { Logger } from "../log.js";
import { BusError } from "./bus.js";
import type { Subjects } from "./subjects.js";

/** JetStream's duplicate window: a publish retried within it with the same `Nats-Msg-Id` is stored once. */
const DUPLICATE_WINDOW_MS = 120_000;

/**
 * How the daemon wants Troupe's streams (troupe.yaml's `nats.stream` and `nats.kv`). Given, a
 * stream is made so, and one that exists is changed to it where it differs; a setting left out
 * leaves the stream as it is, so a stream an operator made is taken as made. Not given (every
 * other role, which may not change streams anyway), streams are made with the defaults when
 * missing and never changed.
 */
export interface StorageSettings {
  stream?: StreamSettings | undefined;
  kv?: KvSettings | undefined;
}

/** The stream settings a troupe.yaml key stands for, as JetStream names them. */
type Wanted = Partial<Pick<StreamConfig, "max_age" | "max_bytes" | "max_msgs" | "num_replicas" | "storage">>;

/** The key of troupe.yaml each setting comes from, and whether JetStream can change it in place. */
const SETTINGS = {
  max_age: { key: "maxAge", changes: true },
  max_bytes: { key: "maxBytes", changes: true },
  max_msgs: { key: "maxEntries", changes: true },
  num_replicas: { key: "replicas", changes: true },
  storage: { key: "storage", changes: false },
} as const;

/**
 * How many events the stream keeps unless troupe.yaml's `nats.stream.maxEntries` says; the oldest go
 * past it. Whoever may append (a host's seed) cannot grow the log without bound. A count, not bytes,
 * for the reason `BUCKET_ENTRIES` gives.
 */
export const EVENT_STREAM_ENTRIES = 10_000_000;

export function eventStreamWanted(settings: StreamSettings | undefined): Wanted {
  const wanted: Wanted = {};
  if (settings?.maxEntries !== undefined) wanted.max_msgs = settings.maxEntries;
  if (settings?.maxAge !== undefined) wanted.max_age = nanos(settings.maxAge);
  if (settings?.maxBytes !== undefined) wanted.max_bytes = settings.maxBytes;
  if (settings?.replicas !== undefined) wanted.num_replicas = settings.replicas;
  if (settings?.storage !== undefined)
    wanted.storage = settings.storage === "memory" ? StorageType.Memory : StorageType.File;
  return wanted;
}

/**
 * How many keys each bucket holds at most, unless troupe.yaml's `nats.kv.maxEntries` says: anyone
 * with a seed can have the server write into a bucket (a get's reply), and a flood then fills a
 * bounded space and is refused, not stored. A count, not bytes: a byte limit is reserved from the
 * server's store for every stream that has one, and a few buckets would use up a shared server.
 */
export const BUCKET_ENTRIES: Record<string, number> = {
  snapshots: 100_000,
  journal: 1_000_000,
  approvals: 100_000,
  answers: 10_000,
  runs: 200_000,
  workers: 10_000,
  actors: 100_000,
};

/**
 * The largest value a bucket takes, for the buckets people's roles write (the client's and the
 * approver's answers): a signed answer is under 5 KB. With its count it bounds what a seed can put
 * in the store (10,000 × 16 KiB, 160 MiB), where the server's largest message (1 MiB) would let it
 * fill the disk. A per-message limit reserves nothing from the server's store, as a byte limit would.
 */
export const BUCKET_VALUE_BYTES: Record<string, number> = {
  answers: 16_384,
};

function valueBytesOf(bucket: string): number | undefined {
  const name = Object.keys(BUCKET_VALUE_BYTES).find((short) => bucket.endsWith(`_${short}`));
  return name ? BUCKET_VALUE_BYTES[name] : undefined;
}

export function bucketWanted(bucket: string, settings: KvSettings | undefined): Wanted {
  const name = Object.keys(BUCKET_ENTRIES).find((short) => bucket.endsWith(`_${short}`));
  const entries = settings?.maxEntries ?? (name ? BUCKET_ENTRIES[name] : undefined);
  return {
    ...(settings?.replicas === undefined ? {} : { num_replicas: settings.replicas }),
    ...(entries === undefined ? {} : { max_msgs: entries }),
  };
}

/** Makes the event stream if it is missing; with settings, changes an existing one to them. */
export async function ensureEventStream(
  jsm: JetStreamManager,
  names: Subjects,
  storage: StorageSettings | undefined,
  log: Logger,
): Promise<void> {
  const wanted = eventStreamWanted(storage?.stream);
  const info = await ensureStream(
    jsm,
    names.eventStream,
    `nats.stream`,
    storage !== undefined,
    wanted,
    log,
    () => ({
      name: names.eventStream,
      subjects: [names.events()],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_msgs: EVENT_STREAM_ENTRIES,
      ...wanted,
      // JetStream keeps the duplicate window within max_age.
      duplicate_window: Math.min(nanos(DUPLICATE_WINDOW_MS), wanted.max_age || Number.POSITIVE_INFINITY),
    }),
  );
  // A stream with no bound at all (made by an earlier Troupe) gets the default one; a bound an
  // operator set is theirs.
  if (storage !== undefined && info?.config.max_msgs === -1 && wanted.max_msgs === undefined)
    await reconcileStream(jsm, info, "nats.stream", { max_msgs: EVENT_STREAM_ENTRIES }, log);
}

/**
 * A bucket's stream as the KV library would make it, but refusing `Nats-Rollup` headers: NATS
 * permissions cannot look at headers, and a rollup on one key a role may write (an approver's
 * answer, a worker's snapshot) would wipe every other key of the bucket. Troupe never rolls up
 * (a deleted key is a `KV-Operation: DEL` marker). A bucket made before this is changed when the
 * daemon opens it; another role may not change a stream, and leaves it to the daemon.
 */
export async function ensureBucketStream(
  jsm: JetStreamManager,
  bucket: string,
  storage: StorageSettings | undefined,
  log: Logger,
): Promise<void> {
  const name = `KV_${bucket}`;
  const wanted = bucketWanted(bucket, storage?.kv);
  const valueBytes = valueBytesOf(bucket);
  const info = await ensureStream(jsm, name, "nats.kv", storage !== undefined, wanted, log, () => ({
    name,
    subjects: [`$KV.${bucket}.>`],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    // A bucket people write (answers) drops its oldest when full: a flood of junk answers cannot
    // shut the real ones out. The others refuse what is past their bound.
    discard: valueBytes === undefined ? DiscardPolicy.New : DiscardPolicy.Old,
    max_msgs_per_subject: 1,
    num_replicas: 1,
    allow_direct: true,
    allow_rollup_hdrs: false,
    deny_delete: true,
    ...(valueBytes === undefined ? {} : { max_msg_size: valueBytes }),
    ...wanted,
  }));
  const fixes = {
    ...(info?.config.allow_rollup_hdrs ? { allow_rollup_hdrs: false } : {}),
    ...(info && valueBytes !== undefined && info.config.max_msg_size !== valueBytes
      ? { max_msg_size: valueBytes }
      : {}),
    ...(info && valueBytes !== undefined && info.config.discard !== DiscardPolicy.Old
      ? { discard: DiscardPolicy.Old }
      : {}),
  };
  if (info && Object.keys(fixes).length > 0)
    await jsm.streams.update(name, { ...info.config, ...fixes }).catch(() => {});
}

/**
 * Makes the stream when it is missing. When it exists and `reconcile` is on, each wanted setting it
 * differs in is changed, or, when JetStream cannot change it in place, said in one warning line.
 * Resolves to the existing stream's info as it is now (undefined when it was made here).
 */
async function ensureStream(
  jsm: JetStreamManager,
  name: string,
  source: string,
  reconcile: boolean,
  wanted: Wanted,
  log: Logger,
  config: () => Partial<StreamConfig> & { name: string },
): Promise<StreamInfo | undefined> {
  let info = await jsm.streams.info(name).catch((error) => {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
      return undefined;
    throw error;
  });
  if (!info) {
    try {
      await jsm.streams.add(config());
      log.info({ stream: name, ...wanted }, "stream created");
      return undefined;
    } catch (error) {
      // Another process may have made it between the look and the add.
      info = await jsm.streams.info(name).catch(() => {
        throw Object.keys(wanted).length > 0 && error instanceof JetStreamApiError
          ? new BusError(`could not make stream ${name} as troupe.yaml's ${source} says: ${error.message}`, {
              cause: error,
            })
          : error;
      });
    }
  }
  return reconcile ? await reconcileStream(jsm, info, source, wanted, log) : info;
}

/** Resolves to the stream as it is now. */
async function reconcileStream(
  jsm: JetStreamManager,
  info: StreamInfo,
  source: string,
  wanted: Wanted,
  log: Logger,
): Promise<StreamInfo> {
  const name = info.config.name;
  const update: Wanted = {};
  const fixed: string[] = [];
  for (const field of Object.keys(wanted) as Array<keyof Wanted>) {
    const want = wanted[field];
    const have = info.config[field];
    if (want === undefined || want === have) continue;
    const { key, changes } = SETTINGS[field];
    const what = `${field} is ${shown(field, have)}, troupe.yaml's ${source}.${key} says ${shown(field, want)}`;
    if (changes) Object.assign(update, { [field]: want });
    else fixed.push(what);
  }
  if (fixed.length > 0)
    log.warn(
      `stream ${name}: ${fixed.join("; ")}: JetStream cannot change that in place; remove the stream (its data goes with it) or change troupe.yaml`,
    );
  if (Object.keys(update).length === 0) return info;
  // JetStream keeps the duplicate window within max_age.
  const window = Math.min(info.config.duplicate_window, update.max_age || Number.POSITIVE_INFINITY);
  try {
    const changed = await jsm.streams.update(name, { ...info.config, ...update, duplicate_window: window });
    log.info({ stream: name, ...update }, `stream ${name} changed as troupe.yaml's ${source} says`);
    return changed;
  } catch (error) {
    log.warn(
      `stream ${name}: could not change ${Object.keys(update).join(", ")} as troupe.yaml's ${source} says: ${(error as Error).message}`,
    );
    return info;
  }
}

function shown(field: keyof Wanted, value: unknown): string {
  if (field === "max_age") return value === 0 ? "none" : `${millis(Number(value)) / 1000}s`;
  if (field === "max_bytes") return value === -1 ? "none" : `${value} bytes`;
  return String(value);
}
