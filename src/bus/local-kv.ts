import { AsyncQueue } from "./async-queue.js";
import {
  assertKvKey,
  type KvChange,
  KvConflictError,
  type KvEntry,
  type KvPutOptions,
  type KvStore,
  type KvValues,
  type KvWatchOptions,
} from "./bus.js";
import type { FileStore } from "./file-store.js";
import { subjectMatches } from "./subjects.js";

interface StoredValue {
  bytes: string;
  revision: number;
}

/** One KV bucket in memory (and in the FileStore when given): revisions, CAS, watches, like NATS KV. */
export class LocalKv implements KvStore {
  #values = new Map<string, StoredValue>();
  #revision = 0;
  #watchers = new Set<{ pattern: string; queue: AsyncQueue<KvChange> }>();

  constructor(
    readonly name: string,
    private readonly store?: FileStore,
  ) {
    for (const { key, json, revision } of store?.loadValues(name) ?? []) {
      this.#values.set(key, { bytes: json, revision });
      this.#revision = Math.max(this.#revision, revision);
    }
  }

  async get<T>(key: string): Promise<KvEntry<T> | null> {
    assertKvKey(key);
    const stored = this.#values.get(key);
    return stored ? { key, value: JSON.parse(stored.bytes) as T, revision: stored.revision } : null;
  }

  async put(key: string, value: unknown, options: KvPutOptions = {}): Promise<number> {
    assertKvKey(key);
    const current = this.#values.get(key)?.revision ?? 0;
    const expected = options.expectedRevision;
    if (expected !== undefined && expected !== current) throw new KvConflictError(this.name, key, expected);
    const stored = { bytes: JSON.stringify(value), revision: ++this.#revision };
    this.#values.set(key, stored);
    this.store?.saveValue(this.name, key, { json: stored.bytes, revision: stored.revision });
    if (this.#watchers.size > 0)
      this.#notify({ key, value: JSON.parse(stored.bytes), revision: stored.revision, op: "put" });
    return stored.revision;
  }

  create(key: string, value: unknown): Promise<number> {
    return this.put(key, value, { expectedRevision: 0 });
  }

  async delete(key: string, options: KvPutOptions = {}): Promise<void> {
    assertKvKey(key);
    const current = this.#values.get(key)?.revision ?? 0;
    const expected = options.expectedRevision;
    if (expected !== undefined && expected !== current) throw new KvConflictError(this.name, key, expected);
    if (!this.#values.delete(key)) return;
    this.store?.deleteValue(this.name, key);
    this.#notify({ key, value: null, revision: ++this.#revision, op: "delete" });
  }

  async keys(pattern = ">"): Promise<string[]> {
    return [...this.#values.keys()].filter((key) => subjectMatches(pattern, key)).sort();
  }

  async values<T>(pattern: string): Promise<KvValues<T>> {
    return (await this.keys(pattern)).map((key) => {
      const stored = this.#values.get(key) as StoredValue;
      return { key, value: JSON.parse(stored.bytes) as T, revision: stored.revision };
    });
  }

  async forget(pattern: string): Promise<number> {
    const keys = await this.keys(pattern);
    for (const key of keys) {
      this.#values.delete(key);
      this.store?.deleteValue(this.name, key);
    }
    return keys.length;
  }

  watch<T>(options: KvWatchOptions = {}): AsyncIterable<KvChange<T>> {
    const pattern = options.key ?? ">";
    const watcher = {
      pattern,
      queue: new AsyncQueue<KvChange>(options.signal, () => this.#watchers.delete(watcher)),
    };
    for (const [key, stored] of this.#values) {
      if (subjectMatches(pattern, key)) {
        watcher.queue.push({ key, value: JSON.parse(stored.bytes), revision: stored.revision, op: "put" });
      }
    }
    this.#watchers.add(watcher);
    return watcher.queue as AsyncIterable<KvChange<T>>;
  }

  close(): void {
    for (const watcher of this.#watchers) watcher.queue.end();
  }

  #notify(change: KvChange): void {
    for (const watcher of this.#watchers) {
      if (subjectMatches(watcher.pattern, change.key)) watcher.queue.push(structuredClone(change));
    }
  }
}
