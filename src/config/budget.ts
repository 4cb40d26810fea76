import { BUDGET_KEYS } from "../events/budget.js";
import type { Budget, BudgetDefaults } from "./budget-schema.js";

/** An agent's budget as it runs: its own keys, and troupe.yaml's `defaults.budget` for the keys it leaves out. */
export function effectiveBudget(own: Budget, defaults: BudgetDefaults): Budget {
  return withDefaults(own, defaults).budget;
}

/** The effective budget, and which of its keys came from the defaults (for `troupe agents list`). */
export function withDefaults(
  own: Budget,
  defaults: BudgetDefaults,
): { budget: Budget; defaulted: Set<keyof Budget> } {
  const budget: Budget = { ...own };
  const defaulted = new Set<keyof Budget>();
  for (const key of BUDGET_KEYS) {
    const value = defaults[key];
    if (budget[key] === undefined && value !== null) {
      budget[key] = value;
      defaulted.add(key);
    }
  }
  return { budget, defaulted };
}
