import type { AgentOutput } from "./agent-types.js";

/** What a stored snapshot says of its agent, read without starting the machine. */
export interface PersistedFacts {
  /** Its state's name (`stopped`, `idle`, …). */
  value: unknown;
  /** Model calls it had made. */
  turns: number;
  /** Its output, once it has stopped. */
  output: AgentOutput | undefined;
  /** Time it had waited for people, in all. */
  waitedMs: number;
}

/**
 * Reads an agent machine's persisted snapshot (as a record stores it), so that nothing outside
 * src/machines needs to know its shape. Only reads: the one way to change one is `reopen`.
 */
export function persistedFacts(persisted: unknown): PersistedFacts {
  const { value, context, output } = persisted as {
    value?: unknown;
    context?: { turns?: number; waitedMs?: number };
    output?: AgentOutput;
  };
  return { value, turns: context?.turns ?? 0, output, waitedMs: context?.waitedMs ?? 0 };
}
