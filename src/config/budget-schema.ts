/* An agent's budget as YAML writes it, and troupe.yaml's `defaults.budget` for the keys it leaves out. */
import { z } from "zod";
import type { BudgetKey } from "../events/budget.js";
import { millisecondsSchema, positiveInt } from "./units.js";

/**
 * What YAML may give each key of a budget (their meaning: src/events/budget.ts). Every key, and no
 * other: a key added there or here alone does not compile.
 */
const budgetLimits = {
  maxTurns: positiveInt,
  maxTokens: positiveInt,
  maxToolCalls: positiveInt,
  /** Milliseconds, or a duration (`5m`, `90s`). */
  maxWallMs: millisecondsSchema,
  /** Milliseconds, or a duration. */
  maxWaitMs: millisecondsSchema,
  maxCostUsd: z.number().positive(),
} satisfies Record<BudgetKey, z.ZodType<number, unknown>>;

export const budgetSchema = z.strictObject(budgetLimits).partial();
export type Budget = z.infer<typeof budgetSchema>;

/** The budget of an agent whose YAML leaves a key out: no agent runs without a turn and time limit. */
export const DEFAULT_BUDGET = { maxTurns: 50, maxWallMs: 30 * 60_000 } as const;

/**
 * `defaults.budget` of troupe.yaml: each key is given to every agent whose own budget leaves it out
 * (key by key). `null` gives none; a key left out here keeps its built-in default (`DEFAULT_BUDGET`).
 */
export const budgetDefaultsSchema = z.strictObject({
  maxTurns: budgetLimits.maxTurns.nullable().default(DEFAULT_BUDGET.maxTurns),
  maxTokens: budgetLimits.maxTokens.nullable().default(null),
  maxToolCalls: budgetLimits.maxToolCalls.nullable().default(null),
  maxWallMs: budgetLimits.maxWallMs.nullable().default(DEFAULT_BUDGET.maxWallMs),
  maxWaitMs: budgetLimits.maxWaitMs.nullable().default(null),
  maxCostUsd: budgetLimits.maxCostUsd.nullable().default(null),
} satisfies Record<BudgetKey, z.ZodType>);
export type BudgetDefaults = z.infer<typeof budgetDefaultsSchema>;
