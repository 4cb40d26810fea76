/**
 * For what is said of each of many like things (a warning line, an event): the first `burst` said
 * each, then one every `everyMs`, with how many were held back before it. A flood costs a count each.
 */
export class SaidAtMost {
  #tokens: number;
  #at: number;
  #held = 0;

  constructor(
    private readonly burst = 20,
    private readonly everyMs = 1000,
    now = Date.now(),
  ) {
    this.#tokens = burst;
    this.#at = now;
  }

  /** Undefined when this one is held back (and counted); else how many were held back before it. */
  take(now = Date.now()): number | undefined {
    this.#tokens = Math.min(this.burst, this.#tokens + (now - this.#at) / this.everyMs);
    this.#at = now;
    if (this.#tokens < 1) {
      this.#held++;
      return undefined;
    }
    this.#tokens--;
    const held = this.#held;
    this.#held = 0;
    return held;
  }
}
