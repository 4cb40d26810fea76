export interface CircuitOptions {
  /** Consecutive failures that open the circuit. Default 5. */
  failureThreshold: number;
  /** How long it stays open before one probe is let through. Default 30000. */
  coolDownMs: number;
  now: () => number;
}

export type CircuitState = "closed" | "open" | "half-open";

/**
 * One per model per process. Closed: calls go through. Open: calls fail fast (the caller moves to a
 * fallback). After the cool-down one probe is let through (half-open): success closes, failure reopens.
 */
export class CircuitBreaker {
  #failures = 0;
  #openedAt: number | undefined;
  #probing = false;
  readonly #options: CircuitOptions;

  constructor(options: Partial<CircuitOptions> = {}) {
    this.#options = { failureThreshold: 5, coolDownMs: 30_000, now: Date.now, ...options };
  }

  get state(): CircuitState {
    if (this.#openedAt === undefined) return "closed";
    return this.#options.now() - this.#openedAt >= this.#options.coolDownMs ? "half-open" : "open";
  }

  /** Whether a call may go now; in half-open, only one caller gets true until it reports. */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === "closed") return true;
    if (state === "open" || this.#probing) return false;
    this.#probing = true;
    return true;
  }

  success(): void {
    this.#failures = 0;
    this.#openedAt = undefined;
    this.#probing = false;
  }

  failure(): void {
    this.#failures++;
    if (this.#probing || this.#failures >= this.#options.failureThreshold) {
      this.#openedAt = this.#options.now();
      this.#probing = false;
    }
  }
}
