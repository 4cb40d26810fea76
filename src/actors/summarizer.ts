import type { Summarize } from "../context/compaction.js";
import type { ModelRouter } from "../model/model-router.js";
import type { ChatMessage } from "../model/types.js";

export const SUMMARIZER_PROMPT = [
  "You compact the conversation of an AI agent so it can carry on with less context.",
  "Write a concise summary of the transcript you are given: the task, what was found (files, facts, numbers),",
  "what was done and changed, what failed and why, and what was about to happen next. Keep names, paths and",
  "values exact. Write it as notes for the agent itself; no preamble.",
].join(" ");

/** Summaries by the agent's own model chain, from a plain transcript (no tool-call structure to get wrong). */
export function summarizer(models: ModelRouter, chain: readonly string[]): Summarize {
  return async (messages, signal) => {
    const response = await models.call(chain, {
      messages: [
        { role: "system", content: SUMMARIZER_PROMPT },
        { role: "user", content: `Transcript to summarize:\n\n${transcript(messages)}` },
      ],
      ...(signal ? { signal } : {}),
    });
    return { text: response.message.content ?? "", usage: response.usage };
  };
}

function transcript(messages: readonly ChatMessage[]): string {
  return messages
    .map((message) => {
      switch (message.role) {
        case "assistant": {
          const calls = (message.tool_calls ?? []).map(
            (c) => `→ ${c.function.name}(${c.function.arguments})`,
          );
          const said = message.content || message.refusal || "";
          return [`[assistant] ${said}`.trimEnd(), ...calls].join("\n");
        }
        case "tool":
          return `[tool result] ${message.content}`;
        default:
          return `[${message.role}] ${message.content}`;
      }
    })
    .join("\n\n");
}
