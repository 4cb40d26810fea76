import { KvConflictError, type KvStore } from "../bus/bus.js";
import type { Logger } from "../log.js";
import type { RecordSeal } from "../trust/record-seal.js";
import { migrateVersioned, type VersionedRecord } from "../util/record-versions.js";
import { type RunRecord, runRecordSchema } from "./api.js";
import type { RecordCopies } from "./record-copies.js";
import { RUN_RECORD_MIGRATIONS, RUN_RECORD_VERSION } from "./run-record-migrations.js";

/**
 * Beside each record while its run has stored state (snapshots, journal): `held.<runId>`, from the
 * start until that state is removed. Start-up reads these, not every run there ever was.
 */
const HELD = "held";
/** How long a list may read the bucket, and how many of the newest runs it gives (the reply is one message). */
const LIST_WITHIN_MS = 5000;
const LIST_LIMIT = 1000;
/** Start-up's reads of the bucket, and how many stray held marks one start removes. */
const START_WITHIN_MS = 10_000;
const RELEASE_AT_START = 100;

/** What runs.list gives: the newest runs, and how many older ones and unreadable keys it left out. */
export interface RunList {
  runs: RunRecord[];
  /** The daemon's own workspace, where a run whose record names none works (runs.list's reply only). */
  workspace?: string;
  more?: number;
  skipped?: number;
  partial?: boolean;
}

/** Set once the held keys cover every run (a bucket from before them is read in full once). */
const HELD_COMPLETE = "index.held";

/**
 * Runs whose record this daemon sealed in a version of its shape that this build does not read (a
 * later Troupe's), by run id, with why: left out as if missing, and said once a call.
 */
type Unread = Map<string, string>;

/** A record found in the daemon's copy, to put back over what the bucket had at `revision` (0: nothing). */
interface FromCopy {
  record: RunRecord;
  value: unknown;
  revision: number;
}

/**
 * The daemon's runs, in the KV bucket `runs`, each record sealed (RecordSeal): a record without a
 * valid seal, however it got there, is not one of this daemon's runs. It is left out of lists, never
 * resumed, and its grants are never taken. Each names the version of its shape (`v`,
 * run-record-migrations.ts), checked under the seal: one of an earlier version is read through the
 * listed steps, one of a version this build does not read is left out as if missing, said in one
 * line, and its held mark kept for a build that reads it. With `copies`, the daemon keeps each
 * record it writes in its data dir too: a key the bucket holds junk under (anyone with a seed can
 * have the server write a reply there), or nothing, whose copy opens is that run, and the copy is
 * put back as it was stored.
 */
export class RunIndex {
  constructor(
    private readonly kv: KvStore,
    private readonly seal: RecordSeal,
    private readonly log: Logger,
    private readonly copies?: RecordCopies,
  ) {}

  /** Whether anything is stored under this run id: a run id in use, sealed or not. */
  async taken(runId: string): Promise<boolean> {
    return (await this.kv.get(runId)) !== null || this.copies?.read(runId) !== undefined;
  }

  async get(runId: string): Promise<RunRecord | undefined> {
    const unread: Unread = new Map();
    const entry = await this.kv.get(runId);
    const record = entry ? this.#open(runId, entry.value, unread) : undefined;
    if (record) return record;
    const copy = this.#copyOf(runId, entry?.revision ?? 0, unread);
    if (copy) await this.#putBack([copy]);
    this.#sayUnread(unread);
    return copy?.record;
  }

  /**
   * Writes a record; a running one is marked held first, so that no crash leaves it unfound. The
   * copy follows the bucket: a copy is never of a record the bucket refused.
   */
  async put(record: RunRecord): Promise<void> {
    const sealed = this.seal.seal({ v: RUN_RECORD_VERSION, ...record });
    // A running run's mark and its record leave together, one wait for both: the daemon's first
    // tool call of a run waits for them (in the bucket's stream, the mark comes first).
    await Promise.all([
      record.status === "running" ? this.kv.put(`${HELD}.${record.runId}`, {}) : undefined,
      this.kv.put(record.runId, sealed),
    ]);
    try {
      this.copies?.write(record.runId, sealed);
    } catch (error) {
      // The bucket has it: the run goes on, only without what would bring its record back.
      this.log.warn(
        { runId: record.runId, err: (error as Error).message },
        "a run record's copy not written",
      );
    }
  }

  /**
   * This daemon's runs, oldest first, read in one sweep of the bucket: the newest `limit` of what
   * the sweep read within `withinMs`. Anyone with a seed can have the server write junk into the
   * bucket (docs/nats-permissions.md): what does not open is skipped and counted, with one warning
   * line a call; a bucket flooded past the deadline gives what was read by then, `partial`.
   */
  async list(options: { withinMs?: number; limit?: number } = {}): Promise<RunList> {
    const unread: Unread = new Map();
    const { records, skipped, partial, copied } = await this.#sweep(
      options.withinMs ?? LIST_WITHIN_MS,
      unread,
    );
    await this.#putBack(copied);
    this.#sayUnread(unread);
    const limit = options.limit ?? LIST_LIMIT;
    return {
      runs: records.slice(-limit),
      ...(records.length > limit ? { more: records.length - limit } : {}),
      ...(skipped ? { skipped } : {}),
      ...(partial ? { partial } : {}),
    };
  }

  /**
   * The runs that still hold stored state: every unfinished run, and the finished ones not yet
   * released. Two sweeps (the marks, the records), however many keys a flood left; a mark with no
   * record of this daemon's (in the bucket or its copy) is released, at most RELEASE_AT_START of
   * them a start; one whose record this build does not read is kept. Only the marks' keys are read,
   * never their values.
   */
  async held(): Promise<RunRecord[]> {
    const unread: Unread = new Map();
    if (!(await this.kv.get(HELD_COMPLETE))) {
      const { records: all, copied } = await this.#sweep(START_WITHIN_MS, unread);
      await this.#putBack(copied);
      this.#sayUnread(unread);
      for (const record of all) await this.kv.put(`${HELD}.${record.runId}`, {});
      await this.kv.put(HELD_COMPLETE, { since: Date.now() });
      return all;
    }
    const marks = (await this.kv.values(`${HELD}.*`, { withinMs: START_WITHIN_MS })).map(({ key }) =>
      key.slice(HELD.length + 1),
    );
    const { records, copied } = await this.#sweep(START_WITHIN_MS, unread);
    const byId = new Map(records.map((record) => [record.runId, record]));
    // A marked run whose record is gone from the bucket: its copy's, when there is one.
    for (const runId of marks) {
      const copy = byId.has(runId) ? undefined : this.#copyOf(runId, 0, unread);
      if (copy) {
        copied.push(copy);
        byId.set(runId, copy.record);
      }
    }
    await this.#putBack(copied);
    this.#sayUnread(unread);
    const held = marks.flatMap((runId) => byId.get(runId) ?? []);
    const unfound = marks.filter((runId) => !byId.has(runId) && !unread.has(runId));
    for (const runId of unfound.slice(0, RELEASE_AT_START)) await this.release(runId);
    if (unfound.length > 0)
      this.log.warn({ marks: unfound.length }, "held marks with no run record of this daemon's: released");
    return held.sort((a, b) => a.startedAt - b.startedAt);
  }

  /** Every record the bucket gives within `withinMs`: a key whose value does not open is its copy's, if that opens (`copied`). */
  async #sweep(
    withinMs: number,
    unread: Unread,
  ): Promise<{ records: RunRecord[]; skipped: number; partial: boolean; copied: FromCopy[] }> {
    const records: RunRecord[] = [];
    const copied: FromCopy[] = [];
    let skipped = 0;
    const entries = await this.kv.values("*", { withinMs });
    for (const { key, value, revision } of entries) {
      const record = this.#open(key, value, unread);
      const copy = record ? undefined : this.#copyOf(key, revision, unread);
      if (copy) copied.push(copy);
      const found = record ?? copy?.record;
      if (found) records.push(found);
      else if (!unread.has(key)) skipped++;
    }
    if (skipped > 0) this.log.warn({ skipped }, "run records this daemon did not seal: left out");
    if (entries.partial)
      this.log.warn({ read: entries.length }, "the runs bucket was not read whole in time");
    return {
      records: records.sort((a, b) => a.startedAt - b.startedAt),
      skipped,
      partial: entries.partial === true,
      copied,
    };
  }

  /**
   * Its record goes without a trace (troupe.yaml's `nats.kv.ttl`), its copy first: a read that finds
   * the bucket's gone finds no copy to put back. Its events stay, per the stream's limits.
   */
  async remove(runId: string): Promise<void> {
    this.copies?.remove(runId);
    await this.kv.forget(runId);
  }

  /** The run holds no stored state any more (its snapshots and journal are gone). */
  async release(runId: string): Promise<void> {
    await this.kv.forget(`${HELD}.${runId}`);
  }

  #copyOf(runId: string, revision: number, unread: Unread): FromCopy | undefined {
    const value = this.copies?.read(runId);
    const record = value === undefined ? undefined : this.#open(runId, value, unread);
    return record && { record, value, revision };
  }

  /**
   * Records found in their copies, put back into the bucket, each only over what was read there: a
   * record written meanwhile (the run went on, or was removed) stands. One warning line a call.
   */
  async #putBack(copied: FromCopy[]): Promise<void> {
    if (copied.length === 0) return;
    const put = await Promise.allSettled(
      copied.map(({ record, value, revision }) =>
        this.kv.put(record.runId, value, { expectedRevision: revision }),
      ),
    );
    const failed = put.flatMap((outcome) =>
      outcome.status === "rejected" && !(outcome.reason instanceof KvConflictError) ? [outcome.reason] : [],
    );
    this.log.warn(
      {
        put: put.filter((outcome) => outcome.status === "fulfilled").length,
        ...(failed.length ? { failed: failed.length, err: (failed[0] as Error).message } : {}),
      },
      "run records written over in the bucket (or gone from it), which this daemon did not seal: put back from its copies",
    );
  }

  /**
   * The record of run `key` in a stored value, when it is one this daemon sealed: its seal checked on
   * the value as stored, then brought up to this version. One of a version this build does not read
   * goes into `unread`.
   */
  #open(key: string, value: unknown, unread: Unread): RunRecord | undefined {
    const opened = this.seal.open<VersionedRecord>(value);
    if (!opened) return undefined;
    const migrated = migrateVersioned(opened, RUN_RECORD_VERSION, RUN_RECORD_MIGRATIONS);
    if ("refused" in migrated) {
      if (opened.runId === key) unread.set(key, migrated.refused);
      return undefined;
    }
    const { v: _version, ...current } = migrated.record;
    const parsed = runRecordSchema.safeParse(current);
    return parsed.success && parsed.data.runId === key ? parsed.data : undefined;
  }

  #sayUnread(unread: Unread): void {
    const [first] = unread;
    if (!first) return;
    this.log.warn(
      { runs: unread.size, runId: first[0], why: first[1] },
      "run records of a version this Troupe does not read (a later one's): left out",
    );
  }
}
