import { describe, expect, it } from "vitest";
import { withOwnCallIds } from "../../src/actors/call-ids.js";
import type { AssistantMessage, ChatMessage } from "../../src/model/types.js";

const call = (id: string, path: string) => ({
  id,
  type: "function" as const,
  function: { name: "write_file", arguments: JSON.stringify({ path }) },
});

describe("a turn's tool call ids", () => {
  it("are kept when no other call has them, and replaced when the conversation, the turn or the journal does", async () => {
    const history: ChatMessage[] = [
      { role: "user", content: "go" },
      { role: "assistant", content: null, tool_calls: [call("call_seen", "a")] },
      { role: "tool", tool_call_id: "call_seen", content: "ok" },
    ];
    const turn: AssistantMessage = {
      role: "assistant",
      content: "Writing.",
      tool_calls: [call("call_new", "b"), call("call_seen", "c"), call("call_new", "d"), call("0", "e")],
    };
    // "0" was taken out of the conversation by compaction, but its call is journaled.
    const own = await withOwnCallIds(turn, history, async (id) => id === "0");
    const ids = (own.tool_calls ?? []).map((c) => c.id);
    expect(ids[0]).toBe("call_new");
    expect(ids.slice(1).every((id) => /^call_[A-Za-z0-9_-]{16}$/.test(id))).toBe(true);
    expect(new Set([...ids, "call_seen"]).size).toBe(5);
    expect((own.tool_calls ?? []).map((c) => c.function.arguments)).toEqual(
      (turn.tool_calls ?? []).map((c) => c.function.arguments),
    );
    expect(own.content).toBe("Writing.");
  });
});
