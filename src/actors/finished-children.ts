import type { Bus } from "../bus/bus.js";
import { isEvent } from "../events/agent-events.js";
import type { ChatMessage } from "../model/types.js";
import { outcomeOf } from "../tools/run-batch.js";
import { childIdOf, resultOf, SUBAGENT_TOOL_PREFIX } from "./subagents.js";

/**
 * The answers of subagents that finished while their parent's batch did not (the run was aborted
 * while a sibling still worked): by call id, each as the tool message the parent would have had (the
 * child's answer through the same pipeline as a batch's: cleaned and wrapped as untrusted data), read
 * from the children's `agent.stopped` in the event log. A parent reopened after the abort takes
 * these instead of "outcome unknown"; a child that had not finished stays unknown.
 */
export async function finishedChildAnswers(
  bus: Bus,
  runId: string,
  parentId: string,
  messages: readonly ChatMessage[],
): Promise<Map<string, ChatMessage>> {
  const answered = new Set(messages.flatMap((m) => (m.role === "tool" ? [m.tool_call_id] : [])));
  const wanted = new Map<string, { callId: string; name: string }>();
  for (const message of messages) {
    if (message.role !== "assistant") continue;
    for (const call of message.tool_calls ?? []) {
      const tool = call.function.name;
      if (answered.has(call.id) || !tool.startsWith(SUBAGENT_TOOL_PREFIX)) continue;
      const name = tool.slice(SUBAGENT_TOOL_PREFIX.length);
      wanted.set(childIdOf(name, runId, parentId, call.id), { callId: call.id, name });
    }
  }
  const answers = new Map<string, ChatMessage>();
  if (wanted.size === 0) return answers;
  for await (const { envelope } of bus.eventLog.read({ runId })) {
    const asked = wanted.get(envelope.agentId);
    if (!asked || envelope.parentId !== parentId || !isEvent(envelope, "agent.stopped")) continue;
    const { data } = envelope;
    if (data.reason !== "done") continue;
    const result = resultOf(asked.name, envelope.agentId, data, data.total);
    const { content } = outcomeOf(result, `${SUBAGENT_TOOL_PREFIX}${asked.name}`, undefined, {});
    answers.set(asked.callId, { role: "tool", tool_call_id: asked.callId, content });
  }
  return answers;
}
