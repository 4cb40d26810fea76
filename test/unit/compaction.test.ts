import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { compactMessages, overThreshold, SUMMARY_PREFIX } from "../../src/context/compaction.js";
import { buildSystemPrompt } from "../../src/context/system-prompt.js";
import {
  countMessagesTokens,
  countTextTokens,
  countToolSpecTokens,
  maxMessagesTokens,
  maxToolSpecTokens,
} from "../../src/model/tokens.js";
import type { ChatMessage } from "../../src/model/types.js";
import { ZERO_USAGE } from "../../src/model/types.js";
import { tempTree } from "../support/cli.js";

const words = (n: number, word = "lorem") =>
  Array.from({ length: n }, (_, i) => `${word}${i % 10}`).join(" ");

/** A conversation of `turns` tool round trips, each with an output of `outputWords` words. */
function conversation(turns: number, outputWords: number): ChatMessage[] {
  const messages: ChatMessage[] = [
    { role: "system", content: "You are a tester." },
    { role: "user", content: "Read every file." },
  ];
  for (let i = 0; i < turns; i++) {
    messages.push({
      role: "assistant",
      content: `Reading file ${i}.`,
      tool_calls: [
        { id: `c${i}`, type: "function", function: { name: "read_file", arguments: `{"path":"f${i}.txt"}` } },
      ],
    });
    messages.push({ role: "tool", tool_call_id: `c${i}`, content: words(outputWords, `file${i}word`) });
  }
  return messages;
}

const noSummary = async () => {
  throw new Error("should not summarise");
};

describe("token counting", () => {
  it("uses a real BPE tokenizer, not characters divided by four", () => {
    expect(countTextTokens("hello world")).toBe(2);
    expect(countTextTokens("")).toBe(0);
    const text = "antidisestablishmentarianism ".repeat(10);
    expect(countTextTokens(text)).not.toBe(Math.ceil(text.length / 4));
  });

  it("bounds a conversation's and tool specs' counts from above without tokenizing, for any script", () => {
    const texts = [
      "plain words here",
      "数据库连接失败，请重试",
      "emoji 🎉🎉🎉 and ÄÖÜ",
      "x".repeat(500),
      '{"a":[1,2,3]}',
    ];
    for (const text of texts) {
      const messages = [...conversation(2, 5), { role: "user" as const, content: text }];
      expect(maxMessagesTokens(messages)).toBeGreaterThanOrEqual(countMessagesTokens(messages));
      const specs = [{ name: "t", description: text, parameters: { type: "object" } }];
      expect(maxToolSpecTokens(specs)).toBeGreaterThanOrEqual(countToolSpecTokens(specs));
    }
  });

  it("says a conversation is over the threshold exactly when its counted tokens are", () => {
    const messages = conversation(10, 50);
    const tokens = countMessagesTokens(conversation(10, 50));
    // Fresh messages (no cached counts), so the bound is what is tried first.
    expect(overThreshold(conversation(10, 50), 0, { contextWindow: (tokens + 1) / 0.8 })).toBe(false);
    expect(overThreshold(conversation(10, 50), 0, { contextWindow: (tokens - 1) / 0.8 })).toBe(true);
    expect(overThreshold(messages, 100, { contextWindow: (tokens + 50) / 0.8 })).toBe(true);
  });
});

describe("compaction", () => {
  it("prunes old bulky tool outputs first, without a model call, when that is enough", async () => {
    const messages = conversation(6, 300);
    const window = countMessagesTokens(messages) * 1.1;
    const result = await compactMessages(messages, { contextWindow: window }, noSummary);
    expect(result.pruned).toBeGreaterThan(0);
    expect(result.summarized).toBe(0);
    expect(result.usage).toEqual(ZERO_USAGE);
    expect(result.tokensAfter).toBeLessThan(result.tokensBefore);
    expect(result.messages).toHaveLength(messages.length);
    expect(result.messages[3]?.content).toMatch(/^\[output pruned to save context: \d+ tokens/);
    // The most recent result stays verbatim.
    expect(result.messages.at(-1)).toBe(messages.at(-1));
  });

  it("summarises older turns by a model call when pruning is not enough, keeping the task and the last turns", async () => {
    const messages = conversation(40, 20);
    const window = 1500;
    const seen: ChatMessage[][] = [];
    const result = await compactMessages(messages, { contextWindow: window }, async (input) => {
      seen.push(input);
      return {
        text: `summary #${seen.length}`,
        usage: { ...ZERO_USAGE, inputTokens: 100, outputTokens: 10 },
      };
    });
    expect(seen.length).toBeGreaterThan(0);
    expect(result.usage.inputTokens).toBe(100 * seen.length);
    expect(result.tokensAfter).toBeLessThanOrEqual(window * 0.5);
    const [system, task, summary, ...recent] = result.messages;
    expect(system).toBe(messages[0]);
    expect(task).toBe(messages[1]);
    expect(summary).toEqual({ role: "user", content: `${SUMMARY_PREFIX}\nsummary #${seen.length}` });
    // The kept part is the tail of the original, verbatim, starting at a call (never at a lone result).
    expect(recent.length).toBeGreaterThan(1);
    expect(recent).toEqual(messages.slice(messages.length - recent.length));
    expect(recent[0]?.role).toBe("assistant");
    // Each summariser input fits its window.
    for (const input of seen) expect(countMessagesTokens(input)).toBeLessThan(window);
  });

  it("never separates a tool call from its result, even with many results per call", async () => {
    const messages: ChatMessage[] = [
      { role: "system", content: "s" },
      { role: "user", content: "task" },
    ];
    for (let i = 0; i < 20; i++) {
      const ids = [0, 1, 2].map((k) => `c${i}_${k}`);
      messages.push({
        role: "assistant",
        content: null,
        tool_calls: ids.map((id) => ({ id, type: "function", function: { name: "grep", arguments: "{}" } })),
      });
      for (const id of ids) messages.push({ role: "tool", tool_call_id: id, content: words(30) });
    }
    for (const window of [600, 900, 1200, 2000]) {
      const result = await compactMessages(
        messages,
        { contextWindow: window, pruneOver: 10_000 },
        async () => ({ text: "s", usage: ZERO_USAGE }),
      );
      const kept = result.messages.slice(3);
      expect(kept[0]?.role).toBe("assistant");
      for (let i = 0; i < kept.length; i++) {
        const message = kept[i];
        if (message?.role === "assistant") {
          const ids = message.tool_calls?.map((c) => c.id) ?? [];
          expect(
            kept.slice(i + 1, i + 1 + ids.length).map((m) => (m as { tool_call_id?: string }).tool_call_id),
          ).toEqual(ids);
        }
      }
    }
  });

  it("says when a request needs compacting, counting the overhead too", () => {
    const messages = conversation(2, 50);
    const tokens = countMessagesTokens(messages);
    expect(overThreshold(messages, 0, { contextWindow: tokens * 2 })).toBe(false);
    expect(overThreshold(messages, tokens, { contextWindow: tokens * 2 })).toBe(true);
  });
});

describe("system prompt", () => {
  it("holds the agent's identity, its systemPrompt and the workspace's AGENTS.md", () => {
    const { dir, dispose } = tempTree({ "AGENTS.md": "Run npm test before you finish.\n" });
    try {
      const prompt = buildSystemPrompt(
        { name: "coder", description: "Codes.", systemPrompt: "Be careful." } as never,
        dir,
      );
      expect(prompt).toBe(
        'You are "coder", an agent run by Troupe. Codes.\n\nBe careful.\n\nProject instructions from AGENTS.md in the workspace:\nRun npm test before you finish.',
      );
      expect(buildSystemPrompt({ name: "x", description: "X." } as never, "/nonexistent")).toBe(
        'You are "x", an agent run by Troupe. X.',
      );
    } finally {
      dispose();
    }
  });

  it("sees AGENTS.md edited, removed and put back between agent starts", () => {
    const { dir, dispose } = tempTree({ "AGENTS.md": "First." });
    const agent = { name: "x", description: "X." } as never;
    const notes = () => buildSystemPrompt(agent, dir).split("AGENTS.md in the workspace:\n")[1];
    try {
      expect(notes()).toBe("First.");
      writeFileSync(join(dir, "AGENTS.md"), "Second, longer.");
      expect(notes()).toBe("Second, longer.");
      rmSync(join(dir, "AGENTS.md"));
      expect(notes()).toBeUndefined();
      writeFileSync(join(dir, "AGENTS.md"), "Third.");
      expect(notes()).toBe("Third.");
    } finally {
      dispose();
    }
  });
});
