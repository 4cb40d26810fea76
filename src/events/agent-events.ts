import { z } from "zod";
import { agentBudget } from "./budget.js";
import type { Envelope } from "./envelope.js";

/*
 * Every event an agent publishes, as zod schemas: the source of truth for `AgentEventMap`, and what
 * an event read from another process (the bus, the log, the local store) is checked against where
 * it is decoded (src/bus/intake.ts). A payload is checked, never rewritten: keys a newer build adds
 * are passed on. The shared shapes below are the source of the types the rest of Troupe uses for
 * them (Usage, ToolEffect, FinishReason, StopReason, Spend, AgentOutput); an agent's budget, its
 * keys and what each counts, is budget.ts's, which troupe.yaml's budget is built over.
 */

const usage = z.object({
  inputTokens: z.number(),
  outputTokens: z.number(),
  /** Input tokens the provider served from its cache (a part of inputTokens). */
  cachedInputTokens: z.number(),
  costUsd: z.number(),
});

/** What model calls used and cost. */
export type Usage = z.infer<typeof usage>;

const toolEffect = z.enum(["read", "write", "execute"]);
const finishReason = z.enum(["stop", "tool_calls", "length", "content_filter", "error", "other"]);
const stopReason = z.enum([
  "done",
  "refused",
  "aborted",
  "budget_exhausted",
  "failed",
  "loop_detected",
  "output_invalid",
]);

/**
 * What a tool does to the world. Read tools run in parallel and are the only ones a subagent may
 * have; write and execute tools run one at a time and go through the approval policy.
 */
export type ToolEffect = z.infer<typeof toolEffect>;
/**
 * Why an answer ended. `error`: the server said the generation failed (`error`, `abort`); `other`: a
 * reason this list does not know, taken as a whole answer.
 */
export type FinishReason = z.infer<typeof finishReason>;
/**
 * Why an agent stopped: the output of its machine's final state. `refused`: the model declined the
 * task (the server's `refusal`), and `result` is what it said. `output_invalid`: its answer did not
 * fit its `output` schema, asked twice; `result` is the last answer, `error` what is wrong with it.
 */
export type StopReason = z.infer<typeof stopReason>;
/** Every stop reason, in the order above: what a run's status may be once it stopped. */
export const STOP_REASONS = stopReason.options;

/** What a subtree spent. */
const spend = z.object({ usage, toolCalls: z.number() });
export type Spend = z.infer<typeof spend>;

/** The output of an agent's machine. */
const agentOutput = z.object({
  reason: stopReason,
  /** The final answer (or, after a terminating tool batch, what the tools said; a refusal's words). */
  result: z.string(),
  /** This agent's own model calls. */
  usage,
  turns: z.number(),
  /** This agent's own tool calls. */
  toolCalls: z.number(),
  /** This agent and all its subagents: what its budget was charged. */
  total: spend,
  /** What went wrong, when `reason` is `failed`. */
  error: z.string().optional(),
  /** The budget's limit that was reached (`maxTurns 3`), when `reason` is `budget_exhausted`. */
  limit: z.string().optional(),
  /** The answer parsed, when the agent has an `output` schema and its answer fits it. */
  output: z.unknown().optional(),
});
export type AgentOutput = z.infer<typeof agentOutput>;

/**
 * The `data` of each event, by type: the envelope on `<p>.evt.<runId>.<agentId>.<type>`. Each
 * agent's events carry a `seq` that starts at 0 and has no gaps.
 */
export const agentEventSchemas = {
  /** First event of an agent. */
  "agent.started": z.object({
    name: z.string(),
    model: z.string(),
    task: z.string(),
    budget: agentBudget,
    depth: z.number(),
    parentId: z.string().optional(),
    /** Where its tools work (a real path): where `troupe resume` of a local run works again. */
    workspace: z.string().optional(),
    /** Where its commands are confined (`sandbox.mode`: `workspace-write`, `read-only`, …). */
    sandbox: z.string().optional(),
  }),
  /**
   * A worker took the agent over from one that went silent, and goes on from its snapshot in
   * `state`. Its epoch is higher than the old host's: readers drop what that host still sends.
   * `rebuilt`: its snapshot could not be read; it goes on from its history in this log.
   */
  "agent.resumed": z.object({ state: z.string(), rebuilt: z.literal(true).optional() }),
  /** The machine entered a state (transient states are not seen). */
  "state.changed": z.object({ from: z.string(), to: z.string() }),
  /** Text as the model streams it. */
  "model.delta": z.object({ text: z.string() }),
  /**
   * The model's reasoning as it streams (a server's `reasoning_content` or `reasoning`): one event
   * per delta, as `model.delta`; a non-streamed answer's reasoning in one. Comes between the turn's
   * `callingModel` and its `model.completed`. Shown to people, never sent back to the model.
   */
  "model.reasoning": z.object({ text: z.string() }),
  /**
   * One model call finished: what it cost and why it ended. `truncatedToolCalls`: the length limit
   * cut a tool call off, so it was dropped (the model is told). A turn that ends with `length`,
   * `content_filter` or `error` and no call to make stops the agent as `failed`, never `done`.
   */
  "model.completed": z.object({
    model: z.string(),
    usage,
    finishReason,
    toolCalls: z.number(),
    truncatedToolCalls: z.literal(true).optional(),
  }),
  /**
   * The final answer does not fit the agent's `output` schema (`problem` says how): the model is
   * asked once more for the JSON, its answer streamed and completed as a turn's is.
   */
  "output.retried": z.object({ problem: z.string() }),
  /** A model call failed and is made again after `delayMs` (`attempt` of `maxRetries`); `error` says what failed. */
  "model.retrying": z.object({
    model: z.string(),
    attempt: z.number(),
    maxRetries: z.number(),
    delayMs: z.number(),
    error: z.string(),
  }),
  /** The model asked for a call; `decision` is the policy's, before any approval. */
  "tool.requested": z.object({
    callId: z.string(),
    name: z.string(),
    arguments: z.string(),
    effect: toolEffect,
    decision: z.enum(["allow", "ask", "deny"]),
    error: z.string().optional(),
  }),
  "tool.started": z.object({ callId: z.string(), name: z.string() }),
  /**
   * How far a running call has come, as its tool (an MCP server) says: `progress` of `total` when the
   * total is known. At most four a second per call. `message` is the server's words, untrusted: cut
   * to 200 characters and redacted, to be shown through `visible`.
   */
  "tool.progress": z.object({
    callId: z.string(),
    name: z.string(),
    progress: z.number(),
    total: z.number().optional(),
    message: z.string().optional(),
  }),
  /**
   * An MCP server asked the agent's model for a completion while one of its tools ran (MCP's
   * sampling): `callId` is that tool call. It was answered by `model` and charged to the agent
   * (`usage`), or refused (`refused`: why, no model called). Its words are the server's to use.
   */
  "sampling.finished": z.object({
    callId: z.string(),
    server: z.string(),
    model: z.string().optional(),
    usage: usage.optional(),
    stopReason: z.enum(["endTurn", "maxTokens"]).optional(),
    refused: z.string().optional(),
  }),
  /**
   * An MCP server's question for the user (MCP's elicitation), put while its tool call `callId` ran,
   * as the approval request `questionId`: how it ended (`accept`, `decline`, `cancel`) and why, when
   * it was not accepted. The answers themselves go to the server only.
   */
  "elicitation.finished": z.object({
    callId: z.string(),
    questionId: z.string(),
    server: z.string(),
    action: z.enum(["accept", "decline", "cancel"]),
    why: z.string().optional(),
  }),
  /**
   * A call finished. `artifacts`: what it made or changed (a write tool's files, workspace-relative);
   * `nextActions`: the calls it suggests next (a narrower grep). Both as the model read them.
   * `preview`: the first 2000 characters of its output.
   */
  "tool.finished": z.object({
    callId: z.string(),
    name: z.string(),
    ok: z.boolean(),
    durationMs: z.number(),
    error: z.string().optional(),
    artifacts: z.array(z.string()).optional(),
    nextActions: z.array(z.string()).optional(),
    /** The start of what the tool said as people see it: cleaned, secrets redacted, not wrapped. */
    preview: z.string().optional(),
  }),
  /** A call waits for a person (or the policy's timeout). */
  "approval.requested": z.object({
    callId: z.string(),
    name: z.string(),
    arguments: z.string(),
    effect: toolEffect,
    /** The exact command, or the diff of the change (then `\n(asked because <escalation>)` when there is one). */
    detail: z.string(),
    /** The paths the call touches. */
    paths: z.array(z.string()),
    /** Why it is asked, in Troupe's words, when the call would leave the sandbox. */
    escalation: z.string().optional(),
  }),
  /**
   * `by` is the approver whose signed answer decided it, checked by the host (or `timeout`, `policy`,
   * or `maxWaitMs`: the agent's time for waiting on people was used up).
   */
  "approval.decided": z.object({
    callId: z.string(),
    approved: z.boolean(),
    reason: z.string().optional(),
    by: z.string(),
  }),
  /**
   * A request closed without an answer: its agent stopped (aborted, out of budget, …) while it
   * waited. `why` says so; the call never ran. Every request ends with this or `approval.decided`.
   */
  "approval.closed": z.object({ callId: z.string(), why: z.string() }),
  /** An answer the host refused; the request stays pending. `by` is who it claimed to be from. */
  "approval.rejected": z.object({ callId: z.string(), why: z.string(), by: z.string().optional() }),
  /**
   * Before each model call: the tokens of the request (its messages and tool specs) against the
   * model's context window, and the share they fill in whole percent. Estimated without tokenizing
   * (exact counts where the compaction check made them, which it does as the context fills; else a
   * quarter of the bytes).
   */
  "context.usage": z.object({ tokens: z.number(), contextWindow: z.number(), percent: z.number() }),
  /**
   * The context crossed into a fuller level: `warning` at 60 %, `critical` at 80 % of the window.
   * Once per crossing; after compaction brings it back down, a new crossing says so again.
   */
  "context.warning": z.object({
    level: z.enum(["warning", "critical"]),
    tokens: z.number(),
    contextWindow: z.number(),
    percent: z.number(),
  }),
  /**
   * The conversation was compacted. `usage`: what the summariser's model calls cost (cost from the
   * price table; zero when pruning was enough), also counted in the agent's own usage.
   */
  "context.compacted": z.object({
    tokensBefore: z.number(),
    tokensAfter: z.number(),
    pruned: z.number(),
    summarized: z.number(),
    usage,
  }),
  /** What this agent and its subagents have spent so far; a parent charges its budget from it. */
  "usage.updated": z.object({ usage, toolCalls: z.number(), turns: z.number() }),
  /** A subagent was spawned as a child actor with a budget carved out of this agent's. */
  "subagent.spawned": z.object({
    childId: z.string(),
    /** The parent's tool call that spawned it. */
    callId: z.string().optional(),
    name: z.string(),
    task: z.string(),
    budget: agentBudget,
  }),
  /** A subagent stopped (for an agent's reasons, or `timeout`); `usage` is what its whole subtree spent. */
  "subagent.finished": z.object({
    childId: z.string(),
    reason: z.enum([...stopReason.options, "timeout"]),
    usage,
    toolCalls: z.number(),
  }),
  /**
   * A skill was loaded: its body put before the task (named by the user, or matched to the task), or
   * returned to the model's load_skill (`model`). `files`: how many other files it listed, readable
   * as `skill:NAME/PATH`. `preApproved`: the tools of this agent its `allowed-tools` pre-approved.
   */
  "skill.loaded": z.object({
    name: z.string(),
    by: z.enum(["user", "match", "model"]),
    score: z.number().optional(),
    files: z.number(),
    preApproved: z.array(z.string()).optional(),
  }),
  /** Last event of an agent. */
  "agent.stopped": agentOutput,
};

type Schemas = typeof agentEventSchemas;

/** Every event's payload by type, inferred from `agentEventSchemas`. */
export type AgentEventMap = { [T in keyof Schemas]: z.infer<Schemas[T]> };

export type AgentEventType = keyof AgentEventMap;

/** One event of a run (of the types given, or any), typed by its `type`. */
export type AgentEvent<T extends AgentEventType = AgentEventType> = {
  [K in T]: Envelope<AgentEventMap[K]> & { type: K };
}[T];

/** A subagent stops for an agent's reasons, or because it ran past its wall time. */
export type SubagentStopReason = StopReason | "timeout";

/**
 * Narrows an envelope to the event `type`. The payload is trusted as it stands: an event from
 * another process was checked where it was read (`checkEventData`), one made here was typed when made.
 */
export function isEvent<T extends AgentEventType>(envelope: Envelope, type: T): envelope is AgentEvent<T> {
  return envelope.type === type;
}

/** Whether the envelope is an agent event of a type this build knows; a `switch` on its `type` then narrows `data`. */
export function isAgentEvent(envelope: Envelope): envelope is AgentEvent {
  return Object.hasOwn(agentEventSchemas, envelope.type);
}

/** Text deltas are most of a run's events: checked by hand, the same check the schema makes. */
const isText = (data: unknown) =>
  typeof data === "object" && data !== null && typeof (data as { text?: unknown }).text === "string";

const checks = new Map<string, (data: unknown) => boolean>(
  Object.entries(agentEventSchemas).map(([type, schema]) => [type, (data) => schema.safeParse(data).success]),
);
checks.set("model.delta", isText);
checks.set("model.reasoning", isText);

/**
 * Why `data` is not the payload of a `type` event, as `path: what is wrong`; undefined when it is,
 * and for a type this build does not know (a newer build's event, passed on for its readers).
 */
export function checkEventData(type: string, data: unknown): string | undefined {
  const check = checks.get(type);
  if (check === undefined || check(data)) return undefined;
  const issue = agentEventSchemas[type as AgentEventType].safeParse(data).error?.issues[0];
  return `${issue?.path.length ? `data.${issue.path.join(".")}` : "data"}: ${issue?.message ?? "invalid"}`;
}
