import { newCallId } from "../model/tool-call-assembler.js";
import type { AssistantMessage, ChatMessage } from "../model/types.js";

/**
 * A turn's tool calls with ids no other call of the agent has. A call's id keys its journal entry
 * and pairs its result in the conversation, so a server that gives an id again (a fixed `0`, a
 * mock's script) would have its call answered with an earlier call's journaled result, or its result
 * paired with an earlier call. Such an id is replaced: one the conversation holds, one twice in the
 * turn, or one the journal knows (`known`: compaction may have taken the call out of the conversation).
 */
export async function withOwnCallIds(
  message: AssistantMessage,
  history: readonly ChatMessage[],
  known: (id: string) => Promise<boolean>,
): Promise<AssistantMessage> {
  if (!message.tool_calls?.length) return message;
  const used = new Set(
    history.flatMap((m) => (m.role === "assistant" ? (m.tool_calls ?? []).map((call) => call.id) : [])),
  );
  const calls: NonNullable<AssistantMessage["tool_calls"]> = [];
  for (const call of message.tool_calls) {
    const taken = used.has(call.id) || (await known(call.id));
    const own = taken ? { ...call, id: newCallId() } : call;
    used.add(own.id);
    calls.push(own);
  }
  return { ...message, tool_calls: calls };
}
