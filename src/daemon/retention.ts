import type { Bus } from "../bus/bus.js";
import type { BucketName } from "../bus/permissions.js";
import type { Logger } from "../log.js";
import type { RunRecord } from "./api.js";
import type { RunIndex } from "./run-index.js";

/** What a run leaves in these buckets is only for bringing it back; the record and events stay. */
const RUN_STATE: BucketName[] = ["snapshots", "journal", "actors"];

/** The longest a timer waits (setTimeout's limit); a later removal is looked at again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How long a finished run keeps what. */
export interface Keep {
  /** Its snapshots, journal and placements (troupe.yaml's `daemon.keepFinished`). */
  stateMs: number;
  /** Its record (troupe.yaml's `nats.kv.ttl`); undefined or 0: for good. */
  recordMs?: number | undefined;
}

/**
 * Removes a finished run's stored state (its agents' snapshots, its tool journal, its placements)
 * once it has been finished for `lifetimes.stateMs`: what a failed run needs to be resumed, kept as long
 * as troupe.yaml's `daemon.keepFinished` says, then gone without a trace (markers too); and its
 * record once it has been finished for `lifetimes.recordMs`, when that is set (the state goes with it
 * if it is still there). A run resumed in the meantime is running again and keeps both. The run
 * stays held (RunIndex) until nothing of it is left to remove, so a daemon that starts finds it.
 */
export class Retention {
  #timers = new Map<string, NodeJS.Timeout>();
  #retiring = new Map<string, Promise<void>>();
  #kept = new Set<string>();
  #stopped = false;

  constructor(
    private readonly bus: Bus,
    private readonly index: RunIndex,
    private readonly lifetimes: Keep,
    private readonly log: Logger,
  ) {}

  /** Removes the run's state, and then its record, when their time comes (at once when it has come). */
  schedule(record: RunRecord): void {
    this.#kept.delete(record.runId);
    if (this.#stopped || record.status === "running") return;
    this.#at(record.runId, this.#dues(record).stateDue);
  }

  #at(runId: string, due: number): void {
    clearTimeout(this.#timers.get(runId));
    const timer = setTimeout(
      () => {
        this.#timers.delete(runId);
        const retiring = this.#retire(runId).finally(() => this.#retiring.delete(runId));
        this.#retiring.set(runId, retiring);
      },
      Math.min(MAX_TIMER_MS, Math.max(0, due - Date.now())),
    );
    timer.unref();
    this.#timers.set(runId, timer);
  }

  /**
   * Keeps the run's state until it is scheduled again (a resume is bringing it back): resolves once
   * a removal already under way is over, so what the resume then reads is what stays.
   */
  async keep(runId: string): Promise<void> {
    this.#kept.add(runId);
    clearTimeout(this.#timers.get(runId));
    this.#timers.delete(runId);
    await this.#retiring.get(runId);
  }

  stop(): void {
    this.#stopped = true;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
  }

  /** When its state goes, and its record (never, when undefined); the state never outlives the record. */
  #dues(record: RunRecord): { stateDue: number; recordDue: number | undefined } {
    const stopped = record.stoppedAt ?? record.startedAt;
    const recordDue = this.lifetimes.recordMs ? stopped + this.lifetimes.recordMs : undefined;
    return { stateDue: Math.min(stopped + this.lifetimes.stateMs, recordDue ?? Infinity), recordDue };
  }

  async #retire(runId: string): Promise<void> {
    try {
      const record = await this.index.get(runId);
      if (record?.status === "running" || this.#kept.has(runId)) return;
      const { stateDue, recordDue } = record
        ? this.#dues(record)
        : { stateDue: 0, recordDue: this.lifetimes.recordMs ? 0 : undefined };
      if (stateDue > Date.now()) {
        this.#at(runId, stateDue);
        return;
      }
      let removed = 0;
      for (const bucket of RUN_STATE) removed += await (await this.bus.kv(bucket)).forget(`${runId}.>`);
      this.log.debug({ runId, removed }, "a finished run's snapshots and journal removed");
      if (recordDue !== undefined && recordDue > Date.now()) {
        this.#at(runId, recordDue); // held until its record goes too
        return;
      }
      if (recordDue !== undefined) {
        await this.index.remove(runId);
        this.log.debug({ runId }, "a finished run's record removed");
      }
      await this.index.release(runId);
    } catch (error) {
      // Left held: the next daemon start looks at it again.
      if (!this.#stopped)
        this.log.warn({ runId, err: (error as Error).message }, "a finished run's state not removed");
    }
  }
}
