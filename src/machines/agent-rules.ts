import { MAX_UNREAD } from "../limits.js";
import { addUsage, type ChatMessage } from "../model/types.js";
import { type CallOutcome, plainOutcome } from "../tools/call-outcome.js";
import type { PlannedCall } from "../tools/plan.js";
import { deniedResult, toolError } from "../tools/tool.js";
import type {
  AgentCommand,
  AgentContext,
  AgentOutput,
  ApprovalDecision,
  ModelTurn,
  Spend,
  StopReason,
  ToolBatchOutput,
} from "./agent-types.js";
import { callSignature, detectLoop } from "./loop-detection.js";

/*
 * The rules the agent machine's guards and actions apply: pure functions of its context and events.
 */

export function userMessage(content: string): ChatMessage {
  return { role: "user", content };
}

export function awaitsDecision(call: PlannedCall): boolean {
  return call.decision === "ask" && call.result === undefined;
}

/** Calls past the tool-call budget get an error result instead of running. */
export function limitBatch(context: AgentContext, plan: PlannedCall[]): PlannedCall[] {
  const max = context.budget.maxToolCalls;
  if (max === undefined) return plan;
  let left = max - context.toolCalls;
  return plan.map((call) => {
    if (call.result) return call;
    if (left > 0) {
      left--;
      return call;
    }
    return {
      ...call,
      decision: "deny" as const,
      result: toolError(`the tool-call budget of ${max} is used up`, "give your answer with what you have"),
    };
  });
}

/**
 * The batch's outcomes in the order the model asked, and which of them ran. A call refused when it
 * was planned or decided is told its refusal as it is.
 */
export function batchOutcomes(context: AgentContext, output: ToolBatchOutput) {
  return context.batch.map((call) => {
    const ran = output.results[call.id];
    const outcome: CallOutcome = call.result
      ? plainOutcome(call.result)
      : (ran ?? plainOutcome(interrupted(call.name)));
    return { call, outcome, executed: call.result === undefined && ran !== undefined };
  });
}

const interrupted = (name: string) =>
  toolError(`${name} did not run (the batch was interrupted)`, "call it again if you still need it");

/**
 * The calls that ran since the agent last changed anything, this batch's included: what loop
 * detection looks at. A batch with a call that may write starts it afresh.
 */
export function recentCallsAfter(context: AgentContext, output: ToolBatchOutput): string[] {
  const executed = batchOutcomes(context, output).filter((r) => r.executed);
  if (executed.some((r) => r.call.effect !== "read")) return [];
  return [...context.loop.recentCalls, ...executed.map((r) => callSignature(r.call.name, r.call.arguments))];
}

export function loopAfter(context: AgentContext, output: ToolBatchOutput): string | undefined {
  return detectLoop(recentCallsAfter(context, output));
}

/** The context after a batch: each result a tool message, the calls that ran counted. */
export function recordBatch(
  context: AgentContext,
  output: ToolBatchOutput,
): Pick<AgentContext, "messages" | "toolCalls" | "loop" | "batch"> {
  const results = batchOutcomes(context, output);
  return {
    messages: [
      ...context.messages,
      ...results.map(({ call, outcome }) => ({
        role: "tool" as const,
        tool_call_id: call.id,
        content: outcome.content,
      })),
    ],
    toolCalls: context.toolCalls + results.filter((r) => r.executed).length,
    loop: { ...context.loop, recentCalls: recentCallsAfter(context, output) },
    batch: [],
  };
}

/** The batch with the answers to its asked calls: an approved call runs, any other is denied. */
export function decideAsked(batch: PlannedCall[], answers: ApprovalDecision[]): PlannedCall[] {
  const decisions = new Map(answers.map((d) => [d.id, d]));
  return batch.map((call) => {
    if (!awaitsDecision(call)) return call;
    const decision = decisions.get(call.id);
    if (decision?.approved) return { ...call, decision: "allow" as const };
    return { ...call, decision: "deny" as const, result: deniedResult(call.name, decision) };
  });
}

/** The batch with every call still waiting for an answer denied: nobody could be asked. */
export function denyAsked(batch: PlannedCall[]): PlannedCall[] {
  return batch.map((call) =>
    awaitsDecision(call)
      ? {
          ...call,
          decision: "deny" as const,
          result: toolError(
            `${call.name} was not approved: the approval could not be asked`,
            "do without this call",
          ),
        }
      : call,
  );
}

/** How an agent stops when its batch said terminate: with what the tools said, not the wrapped text. */
export function terminatedStop(context: AgentContext, output: ToolBatchOutput): AgentOutput {
  const results = batchOutcomes(context, output);
  const executed = results.filter((r) => r.executed).length;
  const text = results.map((r) => r.outcome.answer ?? "").join("\n");
  return stopWith({ ...context, toolCalls: context.toolCalls + executed }, "done", text);
}

/**
 * With `onToolError: stop`, why the agent stops after this batch: the first call that ran and
 * failed (not one refused or denied). Otherwise undefined.
 */
export function toolErrorStop(context: AgentContext, output: ToolBatchOutput): string | undefined {
  if (context.onToolError !== "stop") return undefined;
  const refused = new Set(output.refused);
  const failed = batchOutcomes(context, output).find(
    (r) => r.executed && !refused.has(r.call.id) && !r.outcome.details.ok,
  );
  return failed
    ? `${failed.call.name} failed (onToolError: stop): ${failed.outcome.details.error ?? "error"}`
    : undefined;
}

/** What an agent and its subagents have spent together. */
export function totalSpend(context: Pick<AgentContext, "usage" | "toolCalls" | "children">): Spend {
  return {
    usage: addUsage(context.usage, context.children.usage),
    toolCalls: context.toolCalls + context.children.toolCalls,
  };
}

/** The output of an agent whose machine itself threw: what it had spent, and why it failed. */
export function failedOutput(
  context: Pick<AgentContext, "usage" | "turns" | "toolCalls" | "children">,
  error: unknown,
): AgentOutput {
  return {
    reason: "failed",
    result: "",
    usage: context.usage,
    turns: context.turns,
    toolCalls: context.toolCalls,
    total: totalSpend(context),
    error: error instanceof Error ? error.message : String(error),
  };
}

/** The first budget dimension used up (counting what subagents spent), or undefined. */
export function exhausted(
  context: Pick<AgentContext, "budget" | "usage" | "turns" | "toolCalls" | "children">,
): { limit: string; spent: string } | undefined {
  const { budget } = context;
  const { usage, toolCalls } = totalSpend(context);
  if (budget.maxTurns !== undefined && context.turns >= budget.maxTurns)
    return { limit: `maxTurns ${budget.maxTurns}`, spent: `${budget.maxTurns} turns` };
  if (budget.maxTokens !== undefined && usage.inputTokens + usage.outputTokens >= budget.maxTokens)
    return { limit: `maxTokens ${budget.maxTokens}`, spent: `${budget.maxTokens} tokens` };
  if (budget.maxToolCalls !== undefined && toolCalls >= budget.maxToolCalls)
    return { limit: `maxToolCalls ${budget.maxToolCalls}`, spent: `${budget.maxToolCalls} tool calls` };
  if (budget.maxCostUsd !== undefined && usage.costUsd >= budget.maxCostUsd)
    return { limit: `maxCostUsd ${budget.maxCostUsd}`, spent: `$${budget.maxCostUsd}` };
  return undefined;
}

/** What the budget leaves of tokens (undefined: no limit), or what was spent when it leaves nothing. */
export function budgetLeft(
  context: Pick<AgentContext, "budget" | "usage" | "turns" | "toolCalls" | "children">,
): { tokens: number | undefined } | { spent: string } {
  const spent = exhausted(context);
  if (spent) return { spent: spent.spent };
  const { maxTokens } = context.budget;
  const { usage } = totalSpend(context);
  return { tokens: maxTokens === undefined ? undefined : maxTokens - usage.inputTokens - usage.outputTokens };
}

/**
 * How an agent stops on a turn that called no tool: `refused` with the model's refusal when it
 * declined, else for the reason it was finalizing for (or `done`) with its text.
 */
export function answerStop(context: AgentContext, turn: ModelTurn): AgentOutput {
  const { content, refusal } = turn.message;
  if (refusal) return stopWith(context, "refused", refusal);
  const stopped = stopWith(context, context.finalizing?.reason ?? "done", content ?? "");
  if (!turn.output) return stopped;
  if ("value" in turn.output) return { ...stopped, output: turn.output.value };
  // A budget's or a loop's last answer stops for that reason, fitting or not.
  if (stopped.reason !== "done") return stopped;
  return {
    ...stopWith(context, "output_invalid", content ?? ""),
    error: `the answer does not fit the output schema: ${turn.output.problem}`,
  };
}

/**
 * Why a turn's answer was lost, or undefined when it was whole: the server said generation failed
 * (`error`), or cut the answer off (length limit, content filter) with no tool call to make. A cut
 * tool call is not lost: the model is told and asked again, and a refusal is the whole answer.
 */
export function lostAnswer(turn: ModelTurn): string | undefined {
  if (turn.finishReason === "error") return "the server said the model's answer failed (finish_reason error)";
  if (turn.plan.length > 0 || turn.truncatedToolCalls || turn.message.refusal) return undefined;
  const what = turn.message.content
    ? "the model's answer was cut off"
    : "the model's answer was cut off before it said anything";
  if (turn.finishReason === "length")
    return `${what} by the output length limit (finish_reason length): raise the server's output token limit, or ask for less`;
  if (turn.finishReason === "content_filter")
    return `${what} by the server's content filter (finish_reason content_filter)`;
  return undefined;
}

/** The output of an agent whose answer was lost: failed, with what it said and why. */
export function lostStop(context: AgentContext, turn: ModelTurn): AgentOutput {
  const error = lostAnswer(turn) ?? "the model's answer was lost";
  return { ...stopWith(context, "failed", turn.message.content ?? ""), error };
}

export function lastText(messages: readonly ChatMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message?.role === "assistant" && message.content) return message.content;
  }
  return "";
}

export function stopWith(context: AgentContext, reason: StopReason, result: string): AgentOutput {
  return {
    reason,
    result,
    ...(reason === "budget_exhausted" && context.finalizing?.limit
      ? { limit: context.finalizing.limit }
      : {}),
    usage: context.usage,
    turns: context.turns,
    toolCalls: context.toolCalls,
    total: totalSpend(context),
  };
}

/**
 * How long past `maxWallMs` the run may go: a tenth of it, at most 5 s. The final answer asked for at
 * the wall (or a call already going) gets what is left plus this; then the run stops, whatever is in flight.
 */
export function wallGraceMs(maxWallMs: number): number {
  return Math.min(5000, Math.ceil(maxWallMs / 10));
}

/** The output of a run stopped at its hard wall: what it had, with the text of the answer cut off if any. */
export function wallStop(context: AgentContext, partial: unknown): AgentOutput {
  const text = typeof partial === "string" && partial !== "" ? partial : lastText(context.messages);
  const finalizing = { reason: "budget_exhausted" as const, limit: `maxWallMs ${context.budget.maxWallMs}` };
  return stopWith({ ...context, finalizing }, "budget_exhausted", text);
}

/**
 * Why a steer or a follow-up may not join those the agent holds unread (`MAX_UNREAD`), in words for
 * whoever sent it; undefined when it may, and for every other command.
 */
export function unreadRefusal(
  context: Pick<AgentContext, "runId" | "unread">,
  command: AgentCommand,
): string | undefined {
  if (command.type !== "STEER" && command.type !== "FOLLOW_UP") return undefined;
  const { steering, followUps } = context.unread;
  const [queue, what] =
    command.type === "STEER" ? [steering, "steering messages"] : [followUps, "follow-ups"];
  const chars = queue.reduce((sum, text) => sum + text.length, 0);
  if (queue.length < MAX_UNREAD.messages && chars + command.text.length <= MAX_UNREAD.chars) return undefined;
  return `run ${context.runId} has ${queue.length} unread ${what} (${chars} characters; it holds at most ${MAX_UNREAD.messages}, or ${MAX_UNREAD.chars} characters): wait for it to take them`;
}
