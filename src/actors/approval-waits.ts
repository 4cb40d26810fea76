import type { ApprovalAnswer } from "../approvals/approver.js";
import type { EventPublisher } from "./event-publisher.js";

/** Who denies a call when the agent's time for waiting on people (`maxWaitMs`) is used up. */
export const WAIT_BUDGET = "maxWaitMs";

/**
 * The approval requests an agent waits on, and the bound on how long it waits for people in all
 * (`maxWaitMs`). Every request ends with a line in the log saying how: `approval.decided` when it
 * was answered or denied (by a person, the policy's timeout, or this bound), `approval.closed` when
 * the agent stopped before anyone answered: a terminal that asked the question then says why, and
 * a replay shows each call's outcome.
 */
export class ApprovalWaits {
  readonly #open = new Set<string>();

  constructor(
    private readonly events: EventPublisher,
    private readonly maxWaitMs: number | undefined,
    /** Time waited for people so far, in all (the agent's clock: `WallClock.waitedMs`). */
    private readonly waited: () => number,
  ) {}

  /** Why no more people are waited for, once `maxWaitMs` is used up. */
  spent(): string | undefined {
    if (this.maxWaitMs === undefined || this.waited() < this.maxWaitMs) return undefined;
    return `nobody answered within the time the agent may wait for people (maxWaitMs ${this.maxWaitMs}); go on without this call`;
  }

  /**
   * Waits for `decide`'s answer, for no longer than the wait budget has left: then the call is
   * denied by `maxWaitMs` (and `expired`, told why, closes the request so nobody answers into the
   * void). Either way the outcome is published.
   */
  async bounded(
    callId: string,
    decide: (signal: AbortSignal) => Promise<ApprovalAnswer>,
    signal: AbortSignal,
    expired: (why: string) => Promise<void>,
  ): Promise<ApprovalAnswer> {
    this.#open.add(callId);
    let answer: ApprovalAnswer;
    if (this.maxWaitMs === undefined) answer = await decide(signal);
    else {
      // One controller for the wait, aborted by the agent's signal or when the time is up: what
      // AbortSignal.any would give, without its WeakRefs and sets held for each waiting agent.
      const wait = new AbortController();
      let spent = false;
      const stop = () => wait.abort(signal.reason);
      signal.addEventListener("abort", stop, { once: true });
      const timer = setTimeout(
        () => {
          spent = true;
          wait.abort();
        },
        Math.max(0, this.maxWaitMs - this.waited()),
      );
      try {
        if (signal.aborted) stop();
        answer = await decide(wait.signal);
      } catch (error) {
        if (!spent || signal.aborted) throw error;
        const why = this.spent() ?? `maxWaitMs ${this.maxWaitMs} is used up`;
        await expired(why);
        answer = { approved: false, by: WAIT_BUDGET, reason: why };
      } finally {
        clearTimeout(timer);
        signal.removeEventListener("abort", stop);
      }
    }
    this.#open.delete(callId);
    this.events.emit("approval.decided", { callId, ...answer });
    return answer;
  }

  /** The agent stopped: each request still open is closed, saying why, before the agent's last word. */
  closeAll(why: string): void {
    for (const callId of this.#open) this.events.emit("approval.closed", { callId, why });
    this.#open.clear();
  }
}
