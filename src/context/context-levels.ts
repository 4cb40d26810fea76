/**
 * How full an agent's context is, in AgentForge's levels: `warning` from 60 % of the model's window,
 * `critical` from 80 % (the share at which compaction starts, by default).
 */
export const CONTEXT_LEVELS = { warning: 60, critical: 80 } as const;

export type ContextLevel = "ok" | keyof typeof CONTEXT_LEVELS;

const RANK: Record<ContextLevel, number> = { ok: 0, warning: 1, critical: 2 };

export function contextLevel(percent: number): ContextLevel {
  if (percent >= CONTEXT_LEVELS.critical) return "critical";
  if (percent >= CONTEXT_LEVELS.warning) return "warning";
  return "ok";
}

/** The share of the window `tokens` fill, in whole percent. */
export function contextPercent(tokens: number, contextWindow: number): number {
  return Math.round((tokens / contextWindow) * 100);
}

/**
 * Follows one agent's context from turn to turn: says when it crosses into a higher level, once per
 * crossing. Falling back (after compaction) re-arms the levels above.
 */
export class ContextLevels {
  #level: ContextLevel = "ok";

  /** The level just entered, when `percent` is above the last one; undefined otherwise. */
  next(percent: number): Exclude<ContextLevel, "ok"> | undefined {
    const level = contextLevel(percent);
    const rose = RANK[level] > RANK[this.#level];
    this.#level = level;
    return rose && level !== "ok" ? level : undefined;
  }
}
