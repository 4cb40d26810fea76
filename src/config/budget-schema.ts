/* An agent's budget as YAML writes it, and troupe.yaml's `defaults.budget` for the keys it leaves out. */
import { z } from "zod";
import { millisecondsSchema, positiveInt } from "./units.js";

export const budgetSchema = z.strictObject({
  /** Model calls this agent may make. */
  maxTurns: positiveInt.optional(),
  /** Prompt + completion tokens, over all its model calls. */
  maxTokens: positiveInt.optional(),
  maxToolCalls: positiveInt.optional(),
  /** Wall-clock time from start to stop: milliseconds, or a duration (`5m`, `90s`). */
  maxWallMs: millisecondsSchema.optional(),
  /**
   * Time spent waiting for people to answer approval requests, in all (not counted in maxWallMs):
   * milliseconds or a duration. When it is used up, each call still waiting is denied, saying so.
   */
  maxWaitMs: millisecondsSchema.optional(),
  /** Spend from the price table, in US dollars. */
  maxCostUsd: z.number().positive().optional(),
});
export type Budget = z.infer<typeof budgetSchema>;

/** The budget of an agent whose YAML leaves a key out: no agent runs without a turn and time limit. */
export const DEFAULT_BUDGET = { maxTurns: 50, maxWallMs: 30 * 60_000 } as const;

/**
 * `defaults.budget` of troupe.yaml: each key is given to every agent whose own budget leaves it out
 * (key by key). `null` gives none; a key left out here keeps its built-in default (`DEFAULT_BUDGET`).
 */
export const budgetDefaultsSchema = z.strictObject({
  maxTurns: positiveInt.nullable().default(DEFAULT_BUDGET.maxTurns),
  maxTokens: positiveInt.nullable().default(null),
  maxToolCalls: positiveInt.nullable().default(null),
  maxWallMs: millisecondsSchema.nullable().default(DEFAULT_BUDGET.maxWallMs),
  maxWaitMs: millisecondsSchema.nullable().default(null),
  maxCostUsd: z.number().positive().nullable().default(null),
});
export type BudgetDefaults = z.infer<typeof budgetDefaultsSchema>;
