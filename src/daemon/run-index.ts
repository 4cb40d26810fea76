import type { KvStore } from "../bus/bus.js";
import type { Logger } from "../log.js";
import type { RecordSeal } from "../trust/record-seal.js";
import { type RunRecord, runRecordSchema } from "./api.js";

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

  async put(record: RunRecord): Promise<void> {
    await this.kv.put(record.runId, this.seal.seal(record));
  }

  /** Every run of this daemon's, oldest first. */
  async list(): Promise<RunRecord[]> {
    const records: RunRecord[] = [];
    for (const key of await this.kv.keys()) {
      const entry = await this.kv.get(key);
      const record = entry && this.#open(key, entry.value);
      if (record) records.push(record);
    }
    return records.sort((a, b) => a.startedAt - b.startedAt);
  }

  #open(key: string, value: unknown): RunRecord | undefined {
    const opened = this.seal.open(value);
    const parsed = opened && runRecordSchema.safeParse(opened);
    if (parsed?.success && parsed.data.runId === key) return parsed.data;
    this.log.warn({ runId: key }, "a run record this daemon did not seal: left alone");
    return undefined;
  }
}
