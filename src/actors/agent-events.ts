import type { Budget } from "../config/schema.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { FinishReason, Usage } from "../model/types.js";
import type { ToolEffect } from "../tools/catalog.js";

/**
 * Every event an agent publishes, by type: the `data` of the envelope on
 * `<p>.evt.<runId>.<agentId>.<type>`. Each agent's events carry a `seq` that starts at 0 and has no gaps.
 */
export interface AgentEventMap {
  /** First event of an agent. */
  "agent.started": {
    name: string;
    model: string;
    task: string;
    budget: Budget;
    depth: number;
    parentId?: string;
  };
  /** The machine entered a state (transient states are not seen). */
  "state.changed": { from: string; to: string };
  /** Text as the model streams it. */
  "model.delta": { text: string };
  /**
   * The model's reasoning as it streams (a server's `reasoning_content` or `reasoning`): one event
   * per delta, as `model.delta`; a non-streamed answer's reasoning in one. Comes between the turn's
   * `callingModel` and its `model.completed`. Shown to people, never sent back to the model.
   */
  "model.reasoning": { text: string };
  /**
   * One model call finished: what it cost and why it ended. `truncatedToolCalls`: the length limit
   * cut a tool call off, so it was dropped (the model is told). A turn that ends with `length`,
   * `content_filter` or `error` and no call to make stops the agent as `failed`, never `done`.
   */
  "model.completed": {
    model: string;
    usage: Usage;
    finishReason: FinishReason;
    toolCalls: number;
    truncatedToolCalls?: true;
  };
  /** A model call failed and is made again after `delayMs` (`attempt` of `maxRetries`); `error` says what failed. */
  "model.retrying": { model: string; attempt: number; maxRetries: number; delayMs: number; error: string };
  /** The model asked for a call; `decision` is the policy's, before any approval. */
  "tool.requested": {
    callId: string;
    name: string;
    arguments: string;
    effect: ToolEffect;
    decision: "allow" | "ask" | "deny";
    error?: string;
  };
  "tool.started": { callId: string; name: string };
  /**
   * A call finished. `artifacts`: what it made or changed (a write tool's files, workspace-relative);
   * `nextActions`: the calls it suggests next (a narrower grep). Both as the model read them.
   */
  "tool.finished": {
    callId: string;
    name: string;
    ok: boolean;
    durationMs: number;
    error?: string;
    artifacts?: string[];
    nextActions?: string[];
  };
  /** A call waits for a person (or the policy's timeout). */
  "approval.requested": {
    callId: string;
    name: string;
    arguments: string;
    effect: ToolEffect;
    /** The exact command, or the diff of the change. */
    detail: string;
    /** The paths the call touches. */
    paths: string[];
  };
  /** `by` is the approver whose signed answer decided it, checked by the host (or `timeout`, `policy`). */
  "approval.decided": { callId: string; approved: boolean; reason?: string; by: string };
  /** An answer the host refused; the request stays pending. `by` is who it claimed to be from. */
  "approval.rejected": { callId: string; why: string; by?: string };
  /**
   * Before each model call: the tokens of the request (its messages and tool specs) against the
   * model's context window, and the share they fill in whole percent. Estimated without tokenizing
   * (exact counts where the compaction check made them, which it does as the context fills; else a
   * quarter of the bytes).
   */
  "context.usage": { tokens: number; contextWindow: number; percent: number };
  /**
   * The context crossed into a fuller level: `warning` at 60 %, `critical` at 80 % of the window.
   * Once per crossing; after compaction brings it back down, a new crossing says so again.
   */
  "context.warning": {
    level: "warning" | "critical";
    tokens: number;
    contextWindow: number;
    percent: number;
  };
  /**
   * The conversation was compacted. `usage`: what the summariser's model calls cost (cost from the
   * price table; zero when pruning was enough), also counted in the agent's own usage.
   */
  "context.compacted": {
    tokensBefore: number;
    tokensAfter: number;
    pruned: number;
    summarized: number;
    usage: Usage;
  };
  /** What this agent and its subagents have spent so far; a parent charges its budget from it. */
  "usage.updated": { usage: Usage; toolCalls: number; turns: number };
  /** A subagent was spawned as a child actor with a budget carved out of this agent's. */
  "subagent.spawned": { childId: string; name: string; task: string; budget: Budget };
  /** A subagent stopped; `usage` is what its whole subtree spent. */
  "subagent.finished": { childId: string; reason: SubagentStopReason; usage: Usage; toolCalls: number };
  /**
   * A skill was loaded: its body put before the task (named by the user, or matched to the task), or
   * returned to the model's load_skill (`model`). `files`: how many other files it listed, readable
   * as `skill:NAME/PATH`. `preApproved`: the tools of this agent its `allowed-tools` pre-approved.
   */
  "skill.loaded": {
    name: string;
    by: "user" | "match" | "model";
    score?: number;
    files: number;
    preApproved?: string[];
  };
  /** Last event of an agent. */
  "agent.stopped": AgentOutput;
}

export type AgentEventType = keyof AgentEventMap;

/** A subagent stops for an agent's reasons, or because it ran past its wall time. */
export type SubagentStopReason = AgentOutput["reason"] | "timeout";
