import type { Budget } from "../config/budget-schema.js";
import type { AgentOutput, Spend, StopReason } from "../events/agent-events.js";
import type { AssistantMessage, ChatMessage, FinishReason, Usage } from "../model/types.js";
import type { CallOutcome } from "../tools/call-outcome.js";
import type { PlannedCall } from "../tools/plan.js";

export type { AgentOutput, Spend, StopReason };

export interface AgentInput {
  runId: string;
  agentId: string;
  /** The agent's name in config. */
  name: string;
  /** The whole system prompt; the first message of the conversation. */
  systemPrompt: string;
  budget: Budget;
  /** `stop`: a tool that fails (a call that ran and returned not ok) stops the agent as failed. Default `continue`. */
  onToolError?: "stop" | "continue";
}

/**
 * Everything the agent is; all of it is JSON, so a snapshot holds the whole agent. Its fields stay
 * few, grouped where they belong together: XState's `assign` copies the context with
 * `Object.assign`, and V8 makes a copy with 20 or more properties a dictionary, slow to copy again
 * (a copy took 6.8 µs rather than under one; test/unit/agent-context-shape.test.ts holds it).
 */
export interface AgentContext extends Required<Omit<AgentInput, "systemPrompt">> {
  messages: ChatMessage[];
  /** What the agent was told and has not yet read. */
  unread: Unread;
  usage: Usage;
  turns: number;
  toolCalls: number;
  /** What subagents spent, charged to this agent as they spent it. */
  children: Spend;
  /** The tool batch in progress, in the order the model asked. */
  batch: PlannedCall[];
  /** What loop detection looks at. */
  loop: LoopWatch;
  /** Set when the next model call is the last: no tools, then stop. */
  finalizing: Finalizing | null;
  /** Time spent waiting for people to answer approval requests, in all (for `maxWaitMs`; not wall time). */
  waitedMs: number;
  /** A context-length error was already answered by compacting once. */
  compactedForError: boolean;
  stop: AgentOutput | null;
}

/** Messages from outside, held until the agent can read them. */
export interface Unread {
  /** Injected after the current tool batch. */
  steering: string[];
  /** Taken one at a time when the agent would otherwise stop. */
  followUps: string[];
}

export interface LoopWatch {
  /** Signatures of calls since the last write or execute. */
  recentCalls: string[];
  /** Told once already that it repeats itself. */
  nudged: boolean;
}

/** Why the next model call is the last, and for a budget, which limit was reached. */
export interface Finalizing {
  reason: "budget_exhausted" | "loop_detected";
  limit?: string;
}

/** What the model actor returns: the model's turn, and its tool calls checked against tools and policy. */
export interface ModelTurn {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage: Usage;
  model: string;
  truncatedToolCalls: boolean;
  plan: PlannedCall[];
  /** Its answer checked against the agent's `output` schema, when it has one: parsed, or what is wrong. */
  output?: { value: unknown } | { problem: string };
}

export interface ModelTurnInput {
  messages: ChatMessage[];
  /** False for the final answer of a budget or loop stop. */
  withTools: boolean;
}

export interface ApprovalDecision {
  id: string;
  approved: boolean;
  reason?: string;
  /** Who decided: a person's verified name, `policy` (nobody could be asked) or `timeout`. */
  by?: string;
}

export interface CompactionInput {
  messages: ChatMessage[];
  /**
   * `context_length`: the provider refused the prompt as too long; `requested`: a person asked for
   * it (`COMPACT`), and all but the last turn is summarised, however full the context is.
   */
  reason: "threshold" | "context_length" | "requested";
}

export interface CompactionOutput {
  messages: ChatMessage[];
  usage: Usage;
}

/** Each call's outcome, by call id. */
export type CallOutcomes = Record<string, CallOutcome>;

/** What a tool batch returns. */
export interface ToolBatchOutput {
  /** An outcome for every call the batch was given. */
  results: CallOutcomes;
  /**
   * The calls refused when the batch came to run them (a restored call that this host's policy
   * denies): their results are refusals, not tool errors.
   */
  refused: string[];
}

/**
 * What the machine is told: the commands a host sends it (a task, steering, a follow-up, an abort), and
 * what the host heard on its behalf (the wall's moments, a subagent's spending). Not the agent's
 * published events (`AgentEvent` in src/events/agent-events.ts): those are what it says.
 */
export type AgentCommand =
  | { type: "START"; task: string }
  | { type: "STEER"; text: string }
  | { type: "FOLLOW_UP"; text: string }
  | { type: "ABORT"; reason?: string }
  /**
   * A person asked for the conversation to be compacted now: taken in `idle` by an agent reopened
   * for it (`reopenToCompact`), which compacts and stops again as it had stopped.
   */
  | { type: "COMPACT" }
  /**
   * The wall-time budget's two moments, told by the host from the time the agent worked: its clock
   * stands still while a person is waited for, and a resumed agent's starts from what it had used.
   */
  | { type: "WALL_REACHED" }
  | { type: "WALL_PASSED" }
  /** A wait for people ended after this long (a delta): counted against `maxWaitMs`, not the wall. */
  | { type: "WAITED"; ms: number }
  /** A subagent spent this much more (a delta): charged to this agent's budget. */
  | { type: "CHILD_SPENT"; usage: Usage; toolCalls: number }
  /** Its model answered an MCP server's sampling request while a tool ran: charged as its own turns are. */
  | { type: "SAMPLED"; usage: Usage };
