import type { LoadedConfig } from "../config/load.js";
import type { Budget } from "../config/schema.js";
import { table } from "./table.js";

export function agentsTable(config: LoadedConfig): string {
  const rows = [...config.agents.values()]
    .sort((a, b) => a.definition.name.localeCompare(b.definition.name))
    .map(({ definition }) => [
      definition.name + (definition.readOnly ? " (read-only)" : ""),
      definition.model ?? `${config.troupe.defaultModel} (default)`,
      definition.tools.join(",") || "-",
      definition.subagents.join(",") || "-",
      formatBudget(definition.budget),
    ]);
  return table(["NAME", "MODEL", "TOOLS", "SUBAGENTS", "BUDGET"], rows);
}

export function formatBudget(budget: Budget): string {
  const parts: string[] = [];
  if (budget.maxTurns !== undefined) parts.push(`${budget.maxTurns} turns`);
  if (budget.maxTokens !== undefined) parts.push(`${compact(budget.maxTokens)} tokens`);
  if (budget.maxToolCalls !== undefined) parts.push(`${budget.maxToolCalls} tool calls`);
  if (budget.maxWallMs !== undefined) parts.push(duration(budget.maxWallMs));
  if (budget.maxCostUsd !== undefined) parts.push(`$${budget.maxCostUsd}`);
  return parts.join(", ") || "unlimited";
}

function compact(n: number): string {
  if (n >= 1_000_000 && n % 100_000 === 0) return `${n / 1_000_000}M`;
  if (n >= 1000 && n % 100 === 0) return `${n / 1000}k`;
  return String(n);
}

function duration(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}
