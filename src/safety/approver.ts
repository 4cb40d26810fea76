import type { ToolEffect } from "../tools/catalog.js";

export interface ApprovalRequest {
  runId: string;
  agentId: string;
  callId: string;
  tool: string;
  arguments: string;
  effect: ToolEffect;
  /** The exact command, or the diff of the change (redacted). */
  detail: string;
  /** The paths the call touches. */
  paths: string[];
}

export interface ApprovalAnswer {
  approved: boolean;
  reason?: string;
  /** Who decided: `user`, `policy`, `timeout`… */
  by: string;
}

/** Whoever answers approval requests. Must honour the signal: an aborted agent stops waiting. */
export interface Approver {
  decide(request: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer>;
}

/** Nobody can answer (no terminal, a read-only child): every request is denied at once, with why. */
export function denyingApprover(reason: string): Approver {
  return { decide: async () => ({ approved: false, reason, by: "policy" }) };
}
