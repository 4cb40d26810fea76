import { createActor, type Snapshot } from "xstate";
import { TroupeError } from "../errors.js";
import type { ChatMessage } from "../model/types.js";
import type { PlannedCall } from "../tools/plan.js";
import { agentMachine } from "./agent-machine.js";
import type { AgentContext, AgentInput } from "./agent-types.js";

/** A snapshot that cannot be reopened: it is not of a stopped agent. */
export class NotStoppedError extends TroupeError {
  override name = "NotStoppedError";
}

/**
 * The one way out of `stopped`, for `resume` with an instruction to go on: a stopped agent's persisted
 * snapshot, back in `idle` with the same conversation, budget use and queues, where a START (the
 * instruction) takes it on. XState takes no event in a top-level final state, and `stopped` stays
 * final (it is what makes the agent's output), so the machine makes this state itself
 * (`resolveState`) rather than anyone editing its snapshot. The format is the machine's persisted
 * snapshot, as before. An agent aborted in the middle of a tool batch keeps the reads of it that got
 * no answer (`cutReads`): its START runs them again before the instruction is read; any other call
 * of the batch stays of unknown outcome.
 */
export function reopen(
  persisted: unknown,
  answers: ReadonlyMap<string, ChatMessage> = new Map(),
): Snapshot<unknown> {
  const stopped = persisted as { status?: unknown; value?: unknown; context?: AgentContext };
  if (stopped.status !== "done" || stopped.value !== "stopped" || !stopped.context)
    throw new NotStoppedError(`only a stopped agent can be reopened (this one is ${String(stopped.value)})`);
  const { context } = stopped;
  const state = agentMachine.resolveState({
    value: "idle",
    // What ended it, and the last call it was making, are behind it.
    context: {
      ...context,
      messages: withAnswers(context.messages, answers),
      stop: null,
      finalizing: null,
      batch: context.stop?.reason === "aborted" ? cutReads(context, answers) : [],
    },
  });
  return agentMachine.getPersistedSnapshot(state);
}

/**
 * A stopped agent's persisted snapshot, back in `idle` for a compaction a person asked for (`COMPACT`):
 * all of it as it was, what ended it too, which it ends with again once compacted.
 */
export function reopenToCompact(persisted: unknown): Snapshot<unknown> {
  const stopped = persisted as { status?: unknown; value?: unknown; context?: AgentContext };
  if (stopped.status !== "done" || stopped.value !== "stopped" || !stopped.context)
    throw new NotStoppedError(`only a stopped agent can be compacted (this one is ${String(stopped.value)})`);
  return agentMachine.getPersistedSnapshot(
    agentMachine.resolveState({ value: "idle", context: stopped.context }),
  );
}

/**
 * The calls of an aborted agent's batch to run again: those allowed to run that only read (a
 * subagent call is one) and got no answer, neither in its conversation nor from `answers`. A read
 * run twice changes nothing; what writes or executes may have taken effect, and is not run again.
 */
function cutReads(context: AgentContext, answers: ReadonlyMap<string, ChatMessage>): PlannedCall[] {
  const answered = new Set(context.messages.flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])));
  return context.batch.filter(
    (call) =>
      call.effect === "read" &&
      call.decision === "allow" &&
      !call.result &&
      !answered.has(call.id) &&
      !answers.has(call.id),
  );
}

/** Each answer put with the results of its call's assistant message (the calls without one get "unknown" later). */
function withAnswers(messages: ChatMessage[], answers: ReadonlyMap<string, ChatMessage>): ChatMessage[] {
  if (answers.size === 0) return messages;
  const out: ChatMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as ChatMessage;
    out.push(message);
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    let next = i + 1;
    for (; next < messages.length && messages[next]?.role === "tool"; next++)
      out.push(messages[next] as ChatMessage);
    const had = new Set(out.flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])));
    for (const call of message.tool_calls) {
      const answer = answers.get(call.id);
      if (answer && !had.has(call.id)) out.push(answer);
    }
    i = next - 1;
  }
  return out;
}

/** What an agent's conversation and spending were, rebuilt from elsewhere than its snapshot. */
export interface RebuiltHistory {
  /** After the system prompt. */
  messages: ChatMessage[];
  usage: AgentContext["usage"];
  turns: number;
  toolCalls: number;
  /** Time it waited for people. */
  waitedMs: number;
}

/**
 * A persisted snapshot in `idle` of an agent whose snapshot was lost, made from its history
 * (log-history.ts): its input's context (the system prompt it is given now) with that conversation
 * and spending, where a START (a note saying what happened) takes it on. Made by the machine
 * (`resolveState`), as `reopen` makes its state.
 */
export function rebuild(input: AgentInput, history: RebuiltHistory): Snapshot<unknown> {
  const initial = createActor(agentMachine, { input }).getSnapshot().context;
  const state = agentMachine.resolveState({
    value: "idle",
    context: {
      ...initial,
      messages: [...initial.messages, ...history.messages],
      usage: history.usage,
      turns: history.turns,
      toolCalls: history.toolCalls,
      waitedMs: history.waitedMs,
    },
  });
  return agentMachine.getPersistedSnapshot(state);
}
