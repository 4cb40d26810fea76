import type { Bus } from "../bus/bus.js";
import type { BucketName } from "../bus/permissions.js";
import type { Logger } from "../log.js";
import type { RunRecord } from "./api.js";
import type { RunIndex } from "./run-index.js";

/** What a run leaves in these buckets is only for bringing it back; the record and events stay. */
const RUN_STATE: BucketName[] = ["snapshots", "journal", "actors"];

/** The longest a timer waits (setTimeout's limit); a later removal is looked at again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Removes a finished run's stored state (its agents' snapshots, its tool journal, its placements)
 * once it has been finished for `keepMs`: what a failed run needs to be resumed, kept as long as
 * troupe.yaml's `daemon.keepFinished` says, then gone without a trace (markers too). A run resumed
 * in the meantime is running again and keeps its state.
 */
export class Retention {
  #timers = new Map<string, NodeJS.Timeout>();
  #retiring = new Map<string, Promise<void>>();
  #kept = new Set<string>();
  #stopped = false;

  constructor(
    private readonly bus: Bus,
    private readonly index: RunIndex,
    private readonly keepMs: number,
    private readonly log: Logger,
  ) {}

  /** Removes the run's state when its time comes (at once when it has come). */
  schedule(record: RunRecord): void {
    this.#kept.delete(record.runId);
    if (this.#stopped || record.status === "running") return;
    clearTimeout(this.#timers.get(record.runId));
    const due = (record.stoppedAt ?? record.startedAt) + this.keepMs;
    const timer = setTimeout(
      () => {
        this.#timers.delete(record.runId);
        const retiring = this.#retire(record.runId).finally(() => this.#retiring.delete(record.runId));
        this.#retiring.set(record.runId, retiring);
      },
      Math.min(MAX_TIMER_MS, Math.max(0, due - Date.now())),
    );
    timer.unref();
    this.#timers.set(record.runId, timer);
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

  async #retire(runId: string): Promise<void> {
    try {
      const record = await this.index.get(runId);
      if (record?.status === "running" || this.#kept.has(runId)) return;
      if (record && (record.stoppedAt ?? record.startedAt) + this.keepMs > Date.now()) {
        this.schedule(record);
        return;
      }
      let removed = 0;
      for (const bucket of RUN_STATE) removed += await (await this.bus.kv(bucket)).forget(`${runId}.>`);
      await this.index.release(runId);
      this.log.debug({ runId, removed }, "a finished run's snapshots and journal removed");
    } catch (error) {
      // Left held: the next daemon start looks at it again.
      if (!this.#stopped)
        this.log.warn({ runId, err: (error as Error).message }, "a finished run's state not removed");
    }
  }
}
