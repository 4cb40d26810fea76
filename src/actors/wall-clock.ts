import { wallGraceMs } from "../machines/agent-rules.js";
import type { AgentActor } from "./agent-snapshots.js";

/** The wall's two moments, as the machine hears them. */
export type WallMoment = "WALL_REACHED" | "WALL_PASSED";

/** The time, and a timer: the host's (`Date.now`, `setTimeout`), or a test's. */
export interface Clock {
  now(): number;
  /** Calls `fn` in `ms`; returns what cancels it. */
  after(ms: number, fn: () => void): () => void;
}

const HOST_CLOCK: Clock = {
  now: Date.now,
  after: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/**
 * An agent's wall-time budget on its host's clock. It counts the time the agent works, never the
 * time it waits for a person to answer an approval request: the host pauses it while the machine is
 * in `awaitingApproval` and resumes it after. When the time worked reaches `maxWallMs` it tells the
 * machine `WALL_REACHED` (a last call for the answer), at the end of the grace `WALL_PASSED` (a stop).
 * It also keeps the time waited, in all, for `maxWaitMs`. A resumed agent's clock starts from what
 * its record says it had worked and waited, so nothing it spent before is counted twice or lost.
 */
export class WallClock {
  #worked: number;
  #waited: number;
  /** When the current stretch (of work or of waiting) began; undefined once stopped. */
  #since: number | undefined;
  #waiting = false;
  #timers: Array<() => void> = [];

  constructor(
    private readonly maxWallMs: number | undefined,
    before: { workedMs: number; waitedMs: number },
    private readonly tell: (moment: WallMoment) => void,
    private readonly clock: Clock = HOST_CLOCK,
  ) {
    this.#worked = before.workedMs;
    this.#waited = before.waitedMs;
  }

  /** Time worked so far, waits for people left out: what `maxWallMs` is measured against. */
  workedMs(): number {
    return this.#worked + (this.#since !== undefined && !this.#waiting ? this.clock.now() - this.#since : 0);
  }

  /** Time waited for people so far, in all: what `maxWaitMs` is measured against. */
  waitedMs(): number {
    return this.#waited + (this.#since !== undefined && this.#waiting ? this.clock.now() - this.#since : 0);
  }

  /**
   * Counts work from now, and arms the wall for what is left of it (again, after a wait). Returns how
   * long the wait it ends took (0 when it ends none).
   */
  work(): number {
    if (this.#since !== undefined && !this.#waiting) return 0;
    const waited = this.#waited;
    this.#settle();
    const ended = this.#waited - waited;
    this.#waiting = false;
    this.#since = this.clock.now();
    const worked = this.#worked;
    const max = this.maxWallMs;
    if (max === undefined) return ended;
    this.#timers = [
      this.clock.after(Math.max(0, max - worked), () => this.tell("WALL_REACHED")),
      this.clock.after(Math.max(0, max + wallGraceMs(max) - worked), () => this.tell("WALL_PASSED")),
    ];
    return ended;
  }

  /** Counts waiting from now: the wall stands still until `work`. */
  wait(): void {
    if (this.#since !== undefined && this.#waiting) return;
    this.#settle();
    this.#waiting = true;
    this.#since = this.clock.now();
  }

  /** Stops counting and disarms the wall, for good. */
  stop(): void {
    this.#settle();
    this.#since = undefined;
  }

  /** Adds the stretch that ends now to what it was, and disarms the wall. */
  #settle(): void {
    for (const cancel of this.#timers) cancel();
    this.#timers = [];
    if (this.#since === undefined) return;
    const stretch = this.clock.now() - this.#since;
    if (this.#waiting) this.#waited += stretch;
    else this.#worked += stretch;
    this.#since = undefined;
  }
}

/**
 * Keeps an agent's clock in step with its machine, from the state it is in now: waiting while it
 * awaits an approval, working in any other state, stopped once it stops. The length of each wait is
 * told to the machine (`WAITED`), so its snapshot holds what it waited. Returns what stops the clock.
 */
export function keepTime(actor: AgentActor, clock: WallClock): () => void {
  const step = (snapshot: ReturnType<AgentActor["getSnapshot"]>) => {
    if (snapshot.status !== "active") return clock.stop();
    if (snapshot.value === "awaitingApproval") return clock.wait();
    const waited = clock.work();
    if (waited > 0) actor.send({ type: "WAITED", ms: waited });
  };
  const subscription = actor.subscribe({ next: step, error: () => clock.stop() });
  step(actor.getSnapshot());
  return () => {
    subscription.unsubscribe();
    clock.stop();
  };
}
