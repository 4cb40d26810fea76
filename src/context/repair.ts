import type { ChatMessage } from "../model/types.js";

export const MISSING_RESULT =
  "error: no result was recorded for this call (the run was interrupted); its outcome is unknown. Check before relying on it or repeating it.";

/**
 * Every tool call in the history gets a result right after its assistant message, as the API
 * requires: a missing one (after a crash, say) becomes an "outcome unknown" result; a result with
 * no call is dropped. Returns the same array when nothing needed repair.
 */
export function repairToolPairs(messages: readonly ChatMessage[]): readonly ChatMessage[] {
  const out: ChatMessage[] = [];
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as ChatMessage;
    // Results are placed with their call below; one anywhere else has no call and is dropped.
    if (message.role === "tool") continue;
    out.push(message);
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    const results = new Map<string, ChatMessage>();
    let next = i + 1;
    for (; next < messages.length; next++) {
      const result = messages[next] as ChatMessage;
      if (result.role !== "tool") break;
      results.set(result.tool_call_id, result);
    }
    for (const call of message.tool_calls) {
      out.push(results.get(call.id) ?? { role: "tool", tool_call_id: call.id, content: MISSING_RESULT });
    }
    i = next - 1;
  }
  const unchanged = out.length === messages.length && out.every((message, k) => message === messages[k]);
  return unchanged ? messages : out;
}
