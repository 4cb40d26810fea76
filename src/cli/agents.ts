import { withDefaults } from "../config/budget.js";
import type { Budget } from "../config/budget-schema.js";
import type { LoadedConfig } from "../config/load.js";
import { BUDGET_KEYS } from "../events/budget.js";

/**
 * The agents, one block each, that fits 100 columns: the name, the model and the subagents (wrapped
 * under their start), then the tools (wrapped) and the budget it runs with (troupe.yaml's defaults marked).
 */
export function agentsTable(config: LoadedConfig, width = 100): string {
  const agents = [...config.agents.values()].sort((a, b) =>
    a.definition.name.localeCompare(b.definition.name),
  );
  const label = ({ definition }: (typeof agents)[number]) =>
    definition.name + (definition.readOnly ? " (read-only)" : "");
  const nameWidth = Math.max(...agents.map((agent) => label(agent).length));
  const blocks = agents.map((agent) => {
    const { definition } = agent;
    const { budget, defaulted } = withDefaults(definition.budget, config.troupe.defaults.budget);
    const model = definition.model ?? `${config.troupe.defaultModel} (default)`;
    const head = `${label(agent).padEnd(nameWidth)}  ${model}`;
    return [
      ...(definition.subagents.length ? subagentLines(head, definition.subagents, width) : [head]),
      ...wrap(definition.tools.join(", ") || "none", width - 10).map(
        (line, i) => `  ${i ? "       " : "tools  "} ${line}`,
      ),
      `  budget  ${formatBudget(budget, defaulted)}`,
    ].join("\n");
  });
  return blocks.join("\n");
}

/** The first line with the subagents after it, wrapped under where their list starts. */
function subagentLines(head: string, subagents: readonly string[], width: number): string[] {
  const prefix = `${head}  subagents: `;
  return wrap(subagents.join(", "), Math.max(20, width - prefix.length)).map((line, i) =>
    i === 0 ? prefix + line : " ".repeat(prefix.length) + line,
  );
}

/** Lines of at most `width`, broken after a comma. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/** The budget in words; the keys in `defaulted` (troupe.yaml's `defaults.budget`) say so. */
export function formatBudget(budget: Budget, defaulted: ReadonlySet<keyof Budget> = new Set()): string {
  const shown: Record<keyof Budget, (n: number) => string> = {
    maxTurns: (n) => `${n} turns`,
    maxTokens: (n) => `${compact(n)} tokens`,
    maxToolCalls: (n) => `${n} tool calls`,
    maxWallMs: duration,
    maxWaitMs: (n) => `${duration(n)} waiting`,
    maxCostUsd: (n) => `$${n}`,
  };
  const parts = BUDGET_KEYS.flatMap((key) => {
    const value = budget[key];
    if (value === undefined) return [];
    return [`${shown[key](value)}${defaulted.has(key) ? " (default)" : ""}`];
  });
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
