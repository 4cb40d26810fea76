import { z } from "zod";

/*
 * An agent's budget: its keys and what each one counts, as an agent publishes it (carved for a
 * subagent, in `agent.started` and `subagent.spawned`). troupe.yaml's budget (src/config/budget-schema.ts)
 * is built over these same keys, with the limits config holds each one to.
 */

export const agentBudget = z.object({
  /** Model calls this agent may make. */
  maxTurns: z.number().optional(),
  /** Prompt + completion tokens, over all its model calls. */
  maxTokens: z.number().optional(),
  /** Tool calls, over all its turns. */
  maxToolCalls: z.number().optional(),
  /** Wall-clock time from start to stop, in milliseconds. */
  maxWallMs: z.number().optional(),
  /**
   * Time spent waiting for people to answer approval requests, in all (not counted in maxWallMs), in
   * milliseconds. When it is used up, each call still waiting is denied, saying so.
   */
  maxWaitMs: z.number().optional(),
  /** Spend from the price table, in US dollars. */
  maxCostUsd: z.number().optional(),
});
export type BudgetKey = keyof z.infer<typeof agentBudget>;

/** Every key of a budget, in the order Troupe shows them. */
export const BUDGET_KEYS: readonly BudgetKey[] = agentBudget.keyof().options;
