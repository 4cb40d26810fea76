import type { ToolEffect } from "../config/tool-catalog.js";

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
  /**
   * Set when the call would leave the sandbox (the network, no sandbox, the sandbox off or missing
   * on this machine): why. Such a request is a question of its own: no earlier "always" answer
   * covers it, and "always" given to it allows it once.
   */
  escalation?: string;
}

export interface ApprovalAnswer {
  approved: boolean;
  reason?: string;
  /** Who decided: `user`, `policy`, `timeout`… */
  by: string;
}

/** An answer that was refused (unsigned, badly signed, by an untrusted key, for another request). */
export interface RejectedAnswer {
  answerId?: string;
  why: string;
  /** Who the answer claimed to be from: not verified. */
  by?: string;
}

/**
 * Whoever answers approval requests. Must honour the signal: an aborted agent stops waiting.
 * `rejected` hears of each answer refused on the way; the request stays pending.
 */
export interface Approver {
  decide(
    request: ApprovalRequest,
    signal: AbortSignal,
    rejected?: (refusal: RejectedAnswer) => void,
  ): Promise<ApprovalAnswer>;
  /**
   * The agent has stopped: nothing it asked will be waited for any more. Requests of it still
   * open are closed (`why` says how it ended), so nobody answers into the void.
   */
  close?(agent: { runId: string; agentId: string }, why: string): Promise<void>;
}

/** Nobody can answer (no terminal, a read-only child): every request is denied at once, with why. */
export function denyingApprover(reason: string): Approver {
  return { decide: async () => ({ approved: false, reason, by: "policy" }) };
}
