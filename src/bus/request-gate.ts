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
  readonly #lanes = new Map<
    string,
    { running: number; waiting: Array<() => Promise<void>>; dropped: number; said: number }
  >();

  constructor(
    private readonly limit: RequestLimit,
    private readonly stats: BusStats,
    private readonly logger: Logger,
  ) {}

  /** Runs `answer` now or when its lane has room; false when the lane is full and it was dropped. */
  admit(subject: string, answer: () => Promise<void>): boolean {
    const name = this.limit.lane?.(subject) ?? "";
    let lane = this.#lanes.get(name);
    if (!lane) {
      lane = { running: 0, waiting: [], dropped: 0, said: 0 };
      this.#lanes.set(name, lane);
    }
    if (lane.running < this.limit.inFlight) {
      this.#run(lane, answer);
      return true;
    }
    if (lane.waiting.length < this.limit.queued) {
      lane.waiting.push(answer);
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

  #run(lane: { running: number; waiting: Array<() => Promise<void>> }, answer: () => Promise<void>): void {
    lane.running++;
    void answer()
      .catch(() => {})
      .finally(() => {
        lane.running--;
        const next = lane.waiting.shift();
        if (next) this.#run(lane, next);
      });
  }
}
