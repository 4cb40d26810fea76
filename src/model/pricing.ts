import type { ModelInfo } from "../config/provider-schema.js";
import type { Usage } from "./types.js";

/** US dollars for one call's tokens; cached input at its own price where the table has one. */
export function costOf(usage: Omit<Usage, "costUsd">, prices: ModelInfo | undefined): number {
  if (!prices) return 0;
  const cached = prices.cachedInputPerMTok === undefined ? 0 : usage.cachedInputTokens;
  const cachedPrice = prices.cachedInputPerMTok ?? prices.inputPerMTok;
  return (
    ((usage.inputTokens - cached) * prices.inputPerMTok +
      cached * cachedPrice +
      usage.outputTokens * prices.outputPerMTok) /
    1_000_000
  );
}
