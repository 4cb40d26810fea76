import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { type KV, Kvm, type KvWatchEntry, KvWatchInclude } from "@nats-io/kv";
import type { NatsConnection, QueuedIterator } from "@nats-io/transport-node";
import { AsyncQueue } from "./async-queue.js";
import {
  assertKvKey,
  type KvChange,
  KvConflictError,
  type KvEntry,
  type KvPutOptions,
  type KvStore,
  type KvWatchOptions,
} from "./bus.js";

const encoder = new TextEncoder();

export async function openNatsKv(nc: NatsConnection, bucket: string): Promise<KvStore> {
  // `create` binds to an existing bucket of the same name, so concurrent openers agree.
  const kv = await new Kvm(nc).create(bucket, { history: 1 });
  return new NatsKv(bucket, kv);
}

class NatsKv implements KvStore {
  constructor(
    readonly name: string,
    private readonly kv: KV,
  ) {}

  async get<T>(key: string): Promise<KvEntry<T> | null> {
    const entry = await this.kv.get(assertKvKey(key));
    if (entry?.operation !== "PUT") return null;
    return { key, value: entry.json<T>(), revision: entry.revision };
  }

  async put(key: string, value: unknown, options: KvPutOptions = {}): Promise<number> {
    assertKvKey(key);
    const bytes = encoder.encode(JSON.stringify(value));
    const expected = options.expectedRevision;
    try {
      if (expected === undefined) return await this.kv.put(key, bytes);
      if (expected === 0) return await this.kv.create(key, bytes);
      return await this.kv.update(key, bytes, expected);
    } catch (error) {
      throw this.#conflictOr(error, key, expected);
    }
  }

  create(key: string, value: unknown): Promise<number> {
    return this.put(key, value, { expectedRevision: 0 });
  }

  async delete(key: string, options: KvPutOptions = {}): Promise<void> {
    assertKvKey(key);
    const expected = options.expectedRevision;
    try {
      await this.kv.delete(key, expected === undefined ? {} : { previousSeq: expected });
    } catch (error) {
      throw this.#conflictOr(error, key, expected);
    }
  }

  async keys(): Promise<string[]> {
    const keys: string[] = [];
    for await (const key of await this.kv.keys()) keys.push(key);
    return keys;
  }

  watch<T>(options: KvWatchOptions = {}): AsyncIterable<KvChange<T>> {
    let iterator: QueuedIterator<KvWatchEntry> | undefined;
    const queue = new AsyncQueue<KvChange<T>>(options.signal, () => iterator?.stop());
    void (async () => {
      iterator = await this.kv.watch({
        ...(options.key === undefined ? {} : { key: options.key }),
        include: KvWatchInclude.LastValue,
        ignoreDeletes: false,
      });
      if (queue.ended) iterator.stop();
      for await (const entry of iterator) {
        const deleted = entry.operation !== "PUT";
        queue.push({
          key: entry.key,
          value: deleted ? null : entry.json<T>(),
          revision: entry.revision,
          op: deleted ? "delete" : "put",
        });
      }
      queue.end();
    })().catch(() => queue.end());
    return queue;
  }

  #conflictOr(error: unknown, key: string, expected: number | undefined): unknown {
    if (expected !== undefined && isWrongLastSequence(error)) {
      return new KvConflictError(this.name, key, expected, { cause: error });
    }
    return error;
  }
}

/** JetStream's "wrong last sequence": the compare-and-set of a KV write failed. */
function isWrongLastSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence;
}
