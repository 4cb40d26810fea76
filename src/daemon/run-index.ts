import type { KvStore } from "../bus/bus.js";
import type { Logger } from "../log.js";
import type { RecordSeal } from "../trust/record-seal.js";
import { type RunRecord, runRecordSchema } from "./api.js";

/**
 * Beside each record while its run has stored state (snapshots, journal): `held.<runId>`, from the
 * start until that state is removed. Start-up reads these, not every run there ever was.
 */
const HELD = "held";
/** Set once the held keys cover every run (a bucket from before them is read in full once). */
const HELD_COMPLETE = "index.held";

/**
 * The daemon's runs, in the KV bucket `runs`, each record sealed (RecordSeal): a record without a
 * valid seal, however it got there, is not one of this daemon's runs. It is left out of lists, never
 * resumed, and its grants are never taken.
 */
export class RunIndex {
  constructor(
    private readonly kv: KvStore,
    private readonly seal: RecordSeal,
    private readonly log: Logger,
  ) {}

  /** Whether anything is stored under this run id: a run id in use, sealed or not. */
  async taken(runId: string): Promise<boolean> {
    return (await this.kv.get(runId)) !== null;
  }

  async get(runId: string): Promise<RunRecord | undefined> {
    const entry = await this.kv.get(runId);
    return entry ? this.#open(runId, entry.value) : undefined;
  }

  /** Writes a record; a running one is marked held first, so that no crash leaves it unfound. */
  async put(record: RunRecord): Promise<void> {
    if (record.status === "running") await this.kv.put(`${HELD}.${record.runId}`, {});
    await this.kv.put(record.runId, this.seal.seal(record));
  }

  /** Every run of this daemon's, oldest first, read in one sweep of the bucket. */
  async list(): Promise<RunRecord[]> {
    const records: RunRecord[] = [];
    for (const { key, value } of await this.kv.values("*")) {
      const record = this.#open(key, value);
      if (record) records.push(record);
    }
    return records.sort((a, b) => a.startedAt - b.startedAt);
  }

  /** The runs that still hold stored state: every unfinished run, and the finished ones not yet released. */
  async held(): Promise<RunRecord[]> {
    if (!(await this.kv.get(HELD_COMPLETE))) {
      const all = await this.list();
      for (const record of all) await this.kv.put(`${HELD}.${record.runId}`, {});
      await this.kv.put(HELD_COMPLETE, { since: Date.now() });
      return all;
    }
    const held: RunRecord[] = [];
    // The marks in one sweep (not a get each), then the record of each.
    for (const { key } of await this.kv.values(`${HELD}.*`)) {
      const runId = key.slice(HELD.length + 1);
      const record = await this.get(runId);
      if (record) held.push(record);
      else await this.release(runId);
    }
    return held.sort((a, b) => a.startedAt - b.startedAt);
  }

  /** Its record goes without a trace (troupe.yaml's `nats.kv.ttl`); its events stay, per the stream's limits. */
  async remove(runId: string): Promise<void> {
    await this.kv.forget(runId);
  }

  /** The run holds no stored state any more (its snapshots and journal are gone). */
  async release(runId: string): Promise<void> {
    await this.kv.forget(`${HELD}.${runId}`);
  }

  #open(key: string, value: unknown): RunRecord | undefined {
    const opened = this.seal.open(value);
    const parsed = opened && runRecordSchema.safeParse(opened);
    if (parsed?.success && parsed.data.runId === key) return parsed.data;
    this.log.warn({ runId: key }, "a run record this daemon did not seal: left alone");
    return undefined;
  }
}
