import {
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstream,
} from "@nats-io/jetstream";
import { type KV, Kvm, type KvWatchEntry, KvWatchInclude } from "@nats-io/kv";
import { errors, type NatsConnection, type QueuedIterator } from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import { AsyncQueue } from "./async-queue.js";
import {
  assertKvKey,
  BusClosedError,
  BusError,
  type KvChange,
  KvConflictError,
  type KvEntry,
  type KvPutOptions,
  type KvStore,
  type KvValues,
  type KvWatchOptions,
} from "./bus.js";
import type { AckedPublisher } from "./nats-publisher.js";
import { ensureBucketStream, type StorageSettings } from "./nats-streams.js";

const encoder = new TextEncoder();

/** A watch that can have no consumer reads its keys again this often. */
const POLL_MS = 250;

/** How long one KV read waits for its answer before it is asked again. */
const KV_ATTEMPT_MS = 2000;

export async function openNatsKv(
  nc: NatsConnection,
  jsm: JetStreamManager,
  publisher: AckedPublisher,
  bucket: string,
  storage: StorageSettings | undefined,
  log: Logger,
  options: { retryMs?: number; byGets?: boolean } = {},
): Promise<KvStore> {
  const { retryMs = 30_000, byGets = false } = options;
  // Each read waits at most KV_ATTEMPT_MS before it is asked again (retryMs in all): one asked while
  // the bucket's leader is being elected again (its node lost) is lost, and the library's default of
  // 5 s on top of the election held `troupe status` past its own 10 s.
  // A person's role reaches the buckets under the API prefix its JetStream has (nats-bus.ts).
  const apiPrefix = jsm.getOptions().apiPrefix;
  const js = jetstream(nc, {
    timeout: KV_ATTEMPT_MS,
    checkAPI: !byGets,
    ...(apiPrefix === undefined ? {} : { apiPrefix }),
  });
  if (byGets) {
    // A reader by gets (every role but the daemon's) makes a bucket only where none is yet (a server
    // of one account no daemon has used), as before; the daemon's own buckets it leaves as they are.
    await jsm.streams.info(`KV_${bucket}`).catch(async (error: unknown) => {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound))
        throw error;
      await ensureBucketStream(jsm, bucket, storage, log);
    });
    // By the stream's get, not a direct get (permissions.ts, `readByGets`).
    const kv = await new Kvm(js).open(bucket, { allow_direct: false });
    return new NatsKv(bucket, kv, jsm, publisher, retryMs, true);
  }
  await ensureBucketStream(jsm, bucket, storage, log);
  // `create` binds to an existing bucket of the same name, so concurrent openers agree.
  const kv = await new Kvm(js).create(bucket, { history: 1 });
  return new NatsKv(bucket, kv, jsm, publisher, retryMs);
}

/**
 * A bucket this connection writes and never reads (a person's role and the answers bucket): each
 * write is a publish on the key's subject, expecting the key new, with no look at the bucket's
 * stream first. In the people's account the subjects are an import of the hosts' bucket, which
 * that account cannot see (permissions.ts, `accountsBlock`).
 */
export function blindNatsKv(publisher: AckedPublisher, bucket: string): KvStore {
  const blind = (): never => {
    throw new BusError(`bucket ${bucket} is written blind by this role: it may not read it`);
  };
  const create = async (key: string, value: unknown): Promise<number> => {
    const subject = `$KV.${bucket}.${assertKvKey(key)}`;
    const bytes = encoder.encode(JSON.stringify(value));
    try {
      return (await publisher.publish(subject, bytes, { expectedLastSubjectSeq: 0, stream: `KV_${bucket}` }))
        .seq;
    } catch (error) {
      if (isWrongLastSequence(error)) throw new KvConflictError(bucket, key, 0, { cause: error });
      throw error;
    }
  };
  return {
    name: bucket,
    get: blind,
    put: (key, value, options) => (options?.expectedRevision === 0 ? create(key, value) : blind()),
    create,
    delete: blind,
    keys: blind,
    values: blind,
    forget: blind,
    watch: blind,
  };
}

/**
 * A KV bucket on JetStream. While the server is away, reads and writes are retried (up to
 * `retryMs`), so a brief outage delays state rather than losing it; a conflict, a permission
 * refusal or a closed bus is never retried.
 */
class NatsKv implements KvStore {
  constructor(
    readonly name: string,
    private readonly kv: KV,
    private readonly jsm: JetStreamManager,
    private readonly publisher: AckedPublisher,
    private readonly retryMs: number,
    /** A person's role: no consumers (permissions.ts), so a watch reads the keys again and again. */
    private readonly byGets = false,
  ) {}

  async get<T>(key: string): Promise<KvEntry<T> | null> {
    // Checked before the retries: a malformed key is never a server away for a while.
    const checked = assertKvKey(key);
    const entry = await this.#retry(() => this.kv.get(checked));
    if (entry?.operation !== "PUT") return null;
    // Not JSON: handed on as its text, for the reader's checks to refuse (it is not what T says).
    return { key, value: jsonOrText<T>(entry), revision: entry.revision };
  }

  async put(key: string, value: unknown, options: KvPutOptions = {}): Promise<number> {
    assertKvKey(key);
    const json = JSON.stringify(value);
    const bytes = encoder.encode(json);
    const expected = options.expectedRevision;
    let attempts = 0;
    try {
      return await this.#retry(() => {
        attempts++;
        // A create is left to the library: it also writes over a deleted key's marker.
        if (expected === 0) return this.kv.create(key, bytes);
        return this.publisher
          .publish(`$KV.${this.name}.${key}`, bytes, {
            stream: `KV_${this.name}`,
            expectedLastSubjectSeq: expected,
          })
          .then((ack) => ack.seq);
      });
    } catch (error) {
      const failure = this.#conflictOr(error, key, expected);
      // A retried write whose first try did land (its ack was lost) conflicts with itself.
      if (failure instanceof KvConflictError && attempts > 1) {
        const current = await this.kv.get(key);
        if (current?.operation === "PUT" && current.string() === json) return current.revision;
      }
      throw failure;
    }
  }

  create(key: string, value: unknown): Promise<number> {
    return this.put(key, value, { expectedRevision: 0 });
  }

  async delete(key: string, options: KvPutOptions = {}): Promise<void> {
    assertKvKey(key);
    const expected = options.expectedRevision;
    try {
      await this.#retry(() => this.kv.delete(key, expected === undefined ? {} : { previousSeq: expected }));
    } catch (error) {
      throw this.#conflictOr(error, key, expected);
    }
  }

  /**
   * From the stream's subjects, one request (paged past the server's limit), not the library's
   * `keys()`: its consumer waits for a message with nothing pending after it, and a key written
   * while it lists can leave it waiting for good. A deleted key keeps its marker as its subject's
   * one message, so each subject is looked up to leave those out.
   */
  async keys(pattern = ">"): Promise<string[]> {
    const prefix = `$KV.${this.name}.`;
    const info = await this.#retry(() =>
      this.jsm.streams.info(`KV_${this.name}`, { subjects_filter: `${prefix}${pattern}` }),
    );
    const candidates = Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length));
    const live = await Promise.all(candidates.map(async (key) => ((await this.get(key)) ? key : undefined)));
    return live.filter((key): key is string => key !== undefined).sort();
  }

  /**
   * An ordered consumer over the last message of each matching key, read until nothing is pending:
   * one sweep however many keys there are. A deleted key's marker is left out.
   */
  values<T>(pattern: string, options: { withinMs?: number } = {}): Promise<KvValues<T>> {
    const prefix = `$KV.${this.name}.`;
    const deadline =
      options.withinMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.withinMs;
    if (this.byGets) return this.#valuesByGets<T>(pattern, deadline);
    return this.#retry(async () => {
      const consumer = await this.jsm.jetstream().consumers.get(`KV_${this.name}`, {
        filter_subjects: `${prefix}${pattern}`,
        deliver_policy: DeliverPolicy.LastPerSubject,
      });
      const entries: KvValues<T> = [];
      try {
        if ((await consumer.info(true)).num_pending === 0) return entries;
        const messages = await consumer.consume({
          max_messages: 512,
          expires: Math.max(1000, Math.min(5000, deadline - Date.now())),
        });
        for await (const msg of messages) {
          if (!msg.headers?.get("KV-Operation"))
            entries.push({
              key: msg.subject.slice(prefix.length),
              value: jsonOrText<T>(msg),
              revision: msg.seq,
            });
          if (msg.info.pending === 0) break;
          if (Date.now() >= deadline) {
            entries.partial = true;
            break;
          }
        }
      } finally {
        await consumer.delete().catch(() => {});
      }
      return entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)) as KvValues<T>;
    });
  }

  /** A purge of the bucket's stream by subject: the keys' messages go, markers and all. */
  async forget(pattern: string): Promise<number> {
    const purged = await this.#retry(() =>
      this.jsm.streams.purge(`KV_${this.name}`, { filter: `$KV.${this.name}.${pattern}` }),
    );
    return purged.purged;
  }

  /** `values` for a role that may make no consumer: the keys, then a get each, until the deadline. */
  async #valuesByGets<T>(pattern: string, deadline: number): Promise<KvValues<T>> {
    const entries: KvValues<T> = [];
    for (const key of await this.keys(pattern)) {
      if (Date.now() >= deadline) {
        entries.partial = true;
        break;
      }
      const entry = await this.get<T>(key);
      if (entry) entries.push(entry);
    }
    return entries;
  }

  /**
   * The current values, then every change, until the signal aborts. A watch the server ends (its
   * consumer lost when NATS restarts) is made again, after a pause, for as long as it is wanted:
   * the current values come again then, so a reader takes a change it has seen as news no more.
   */
  watch<T>(options: KvWatchOptions = {}): AsyncIterable<KvChange<T>> {
    let iterator: QueuedIterator<KvWatchEntry> | undefined;
    const queue = new AsyncQueue<KvChange<T>>(options.signal, () => iterator?.stop());
    if (this.byGets) {
      this.#poll(options.key, queue).then(
        () => queue.end(),
        () => queue.end(),
      );
      return queue;
    }
    void (async () => {
      let delay = 100;
      while (!queue.ended) {
        try {
          iterator = await this.kv.watch({
            ...(options.key === undefined ? {} : { key: options.key }),
            include: KvWatchInclude.LastValue,
            ignoreDeletes: false,
          });
          if (queue.ended) iterator.stop();
          for await (const entry of iterator) {
            delay = 100;
            const deleted = entry.operation !== "PUT";
            queue.push({
              key: entry.key,
              // Not JSON (anyone who may write a key can write anything): handed on as the text it
              // is, for the reader's checks to refuse, rather than ending the watch.
              value: deleted ? null : jsonOrText<T>(entry),
              revision: entry.revision,
              op: deleted ? "delete" : "put",
            });
          }
        } catch (error) {
          // Refused (permissions) or closed: not a watch that coming back would mend.
          const closed =
            error instanceof BusClosedError ||
            error instanceof errors.ClosedConnectionError ||
            error instanceof errors.DrainingConnectionError;
          if (closed || !isTransient(error)) break;
        }
        if (queue.ended) break;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 2000);
      }
      queue.end();
    })().catch(() => queue.end());
    return queue;
  }

  /**
   * A watch's changes by looking at the bucket's stream every POLL_MS and, when it changed (its last
   * sequence or its count: a put, a delete's marker, a purge), reading the keys again: each put once
   * per revision, each delete once. The server away is waited out, as a watch's consumer would be.
   */
  async #poll<T>(key: string | undefined, queue: AsyncQueue<KvChange<T>>): Promise<void> {
    const seen = new Map<string, number>();
    let last = "";
    while (!queue.ended) {
      try {
        const { state } = await this.#retry(() => this.jsm.streams.info(`KV_${this.name}`));
        const now = `${state.last_seq}/${state.messages}`;
        if (now !== last) {
          await this.#pollOnce(key, seen, queue);
          last = now;
        }
      } catch (error) {
        if (error instanceof BusClosedError || !isTransient(error)) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  async #pollOnce<T>(
    key: string | undefined,
    seen: Map<string, number>,
    queue: AsyncQueue<KvChange<T>>,
  ): Promise<void> {
    const keys = key === undefined ? await this.keys() : [key];
    const now = new Set<string>();
    for (const name of keys) {
      const entry = await this.get<T>(name);
      if (!entry) continue;
      now.add(name);
      if (seen.get(name) === entry.revision) continue;
      seen.set(name, entry.revision);
      queue.push({ key: name, value: entry.value, revision: entry.revision, op: "put" });
    }
    for (const [name, revision] of seen)
      if (!now.has(name)) {
        seen.delete(name);
        queue.push({ key: name, value: null, revision, op: "delete" });
      }
  }

  async #retry<T>(operation: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.retryMs;
    let delay = 25;
    for (;;) {
      try {
        return await operation();
      } catch (error) {
        if (error instanceof BusClosedError || error instanceof errors.ClosedConnectionError)
          throw new BusClosedError();
        if (!isTransient(error) || Date.now() + delay >= deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 1000);
      }
    }
  }

  #conflictOr(error: unknown, key: string, expected: number | undefined): unknown {
    if (expected !== undefined && isWrongLastSequence(error)) {
      return new KvConflictError(this.name, key, expected, { cause: error });
    }
    return error;
  }
}

/** Faults worth waiting out: the server away or slow. Conflicts and refusals are answers, not faults. */
function isTransient(error: unknown): boolean {
  if (isWrongLastSequence(error)) return false;
  const text = `${(error as Error)?.name} ${(error as Error)?.message} ${String((error as Error)?.cause ?? "")}`;
  return !/Permission|Authoriz|InvalidArgument|InvalidSubject|bucket not found/i.test(text);
}

/** JetStream's "wrong last sequence": the compare-and-set of a KV write failed. */
function isWrongLastSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence;
}

function jsonOrText<T>(entry: { json<V>(): V; string(): string }): T {
  try {
    return entry.json<T>();
  } catch {
    return entry.string() as T;
  }
}
