import type { Logger } from "../log.js";
import type { BusStats, RequestLimit } from "./bus.js";

/** How often a lane that drops requests says so, at most. */
const SAY_EVERY_MS = 10_000;

/**
 * Runs a subscription's responders at most `inFlight` at a time in each lane (a lane per what
 * `lane(subject)` says), keeping at most `queued` waiting; a request past that is dropped before
 * it is decoded, unanswered (its requester times out), counted and said once a while. A flood of
 * one lane costs a check per message and leaves the other lanes as they were: their requests wait
 * behind their own, never behind the flood.
 */
export class RequestGate {
  readonly #lanes = new Map<string, Lane>();

  constructor(
    private readonly limit: RequestLimit,
    private readonly stats: BusStats,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** Runs `answer` now or when its lane has room; false when the lane is full and it was dropped. */
  admit(subject: string, answer: () => Promise<void>): boolean {
    const name = this.limit.lane?.(subject) ?? "";
    let lane = this.#lanes.get(name);
    if (!lane) {
      lane = { running: 0, waiting: [], dropped: 0, stale: 0, said: 0 };
      this.#lanes.set(name, lane);
    }
    if (lane.running < this.limit.inFlight) {
      this.#run(lane, answer);
      return true;
    }
    if (lane.waiting.length < this.limit.queued) {
      lane.waiting.push({ answer, at: this.now() });
      return true;
    }
    this.stats.dropped++;
    lane.dropped++;
    const now = Date.now();
    if (now - lane.said >= SAY_EVERY_MS) {
      this.logger.warn(
        {
          lane: name || "all",
          dropped: lane.dropped,
          inFlight: this.limit.inFlight,
          queued: this.limit.queued,
        },
        "requests come faster than they are answered: those past the queue are dropped unanswered",
      );
      lane.said = now;
      lane.dropped = 0;
    }
    return false;
  }

  #run(lane: Lane, answer: () => Promise<void>): void {
    lane.running++;
    void answer()
      .catch(() => {})
      .finally(() => {
        lane.running--;
        const next = this.#next(lane);
        if (next) this.#run(lane, next);
      });
  }

  /** The next request of the lane whose requester may still be waiting; older ones are dropped. */
  #next(lane: Lane): (() => Promise<void>) | undefined {
    const { staleMs } = this.limit;
    for (let next = lane.waiting.shift(); next; next = lane.waiting.shift()) {
      if (staleMs === undefined || this.now() - next.at < staleMs) return next.answer;
      this.stats.dropped++;
      lane.stale++;
    }
    if (lane.stale > 0) {
      this.logger.warn(
        { dropped: lane.stale, waitedMs: staleMs },
        "dropped requests that waited longer than their requesters wait, unanswered",
      );
      lane.stale = 0;
    }
    return undefined;
  }
}

interface Lane {
  running: number;
  waiting: Array<{ answer: () => Promise<void>; at: number }>;
  dropped: number;
  /** Stale requests dropped since the lane's queue last ran dry (said then, in one line). */
  stale: number;
  said: number;
}
