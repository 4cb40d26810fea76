import { describe, expect, it } from "vitest";
import { agentsTable } from "../../src/cli/agents.js";
import { testConfig } from "../support/config.js";

const budgetLine = (table: string, agent: string) => {
  const lines = table.split("\n");
  const at = lines.findIndex((line) => line.startsWith(agent));
  return lines.slice(at + 1).find((line) => line.startsWith("  budget"));
};

describe("troupe agents list: budgets", () => {
  it("shows the budget an agent runs with, marking what troupe.yaml's defaults gave it", () => {
    const config = testConfig({ defaults: { budget: { maxTurns: 20, maxCostUsd: 0.5 } } }, [
      { name: "bare", description: "No budget." },
      { name: "capped", description: "Some.", budget: { maxTurns: 5, maxTokens: 100_000 } },
      { name: "full", description: "All.", budget: { maxTurns: 3, maxWallMs: 60_000, maxCostUsd: 2 } },
    ]);
    const table = agentsTable(config);
    expect(budgetLine(table, "bare")).toBe("  budget  20 turns (default), 30m (default), $0.5 (default)");
    expect(budgetLine(table, "capped")).toBe("  budget  5 turns, 100k tokens, 30m (default), $0.5 (default)");
    expect(budgetLine(table, "full")).toBe("  budget  3 turns, 1m, $2");
    // Defaults set to null give none.
    const none = testConfig({ defaults: { budget: { maxTurns: null } } }, [
      { name: "bare", description: "B." },
    ]);
    expect(budgetLine(agentsTable(none), "bare")).toBe("  budget  30m (default)");
  });
});
