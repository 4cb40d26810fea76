import { createRequire } from "node:module";
import type * as O200k from "gpt-tokenizer/encoding/o200k_base";
import type { ChatMessage, ToolSpec } from "./types.js";

/** The encoding's tables take a few hundred ms to load: loaded at the first count, not at start. */
const require = createRequire(import.meta.url);
let encoding: typeof O200k | undefined;
/**
 * Special tokens (`<|endoftext|>`, `<|im_start|>`, …) are counted as the ordinary text they are: a
 * file or a tool's output may hold them, and the tokenizer's default is to throw on them.
 */
const AS_TEXT = { disallowedSpecial: new Set<string>() };
const countTokens = (text: string): number => {
  encoding ??= require("gpt-tokenizer/encoding/o200k_base") as typeof O200k;
  return encoding.countTokens(text, AS_TEXT);
};

/**
 * Token counts from a real BPE tokenizer (o200k_base, the GPT-4o family's). Other models' tokenizers
 * differ by a few percent; the compaction threshold leaves room for that.
 */
export function countTextTokens(text: string): number {
  if (text.length <= PIECE) return text.length === 0 ? 0 : countTokens(text);
  // BPE is quadratic in a run with no break in it (a minified file, "x" 30,000 times: 0.6 s), so a
  // long text is counted a piece at a time, each cut at a space where there is one. A cut inside a
  // word costs a token at most.
  let total = 0;
  for (let start = 0; start < text.length; ) {
    let end = Math.min(text.length, start + PIECE);
    if (end < text.length) {
      const space = text.lastIndexOf(" ", end);
      if (space > start + PIECE / 2) end = space;
    }
    total += countTokens(text.slice(start, end));
    start = end;
  }
  return total;
}

/** The longest text counted in one go. */
const PIECE = 2048;

/** Per-message framing tokens in the Chat Completions format. */
const MESSAGE_OVERHEAD = 4;
const REPLY_PRIMING = 3;

const cache = new WeakMap<ChatMessage, number>();

/**
 * A message's tokens, its text counted by `count`: its content (a refusal's words where it has none,
 * as they are sent) and tool calls, with their framing.
 */
function messageTokens(message: ChatMessage, count: (text: string) => number): number {
  const refusal = message.role === "assistant" ? message.refusal : undefined;
  let tokens = MESSAGE_OVERHEAD + count(message.content || refusal || "");
  if (message.role === "assistant" && message.tool_calls) {
    for (const call of message.tool_calls)
      tokens += MESSAGE_OVERHEAD + count(call.function.name) + count(call.function.arguments);
  }
  return tokens;
}

/** Messages are treated as immutable: a message's count is computed once. */
export function countMessageTokens(message: ChatMessage): number {
  let tokens = cache.get(message);
  if (tokens === undefined) {
    tokens = messageTokens(message, countTextTokens);
    cache.set(message, tokens);
  }
  return tokens;
}

export function countMessagesTokens(messages: readonly ChatMessage[]): number {
  let total = REPLY_PRIMING;
  for (const message of messages) total += countMessageTokens(message);
  return total;
}

/** At least `countTextTokens(text)`, without tokenizing: a token is at least one UTF-8 byte. */
const maxTextTokens = (text: string): number => Buffer.byteLength(text, "utf8");

/**
 * Fewer tokens than a model's tokenizer makes of `text`, bar freak text, without tokenizing: one per
 * 8 UTF-8 bytes. Text takes one per 2.5–6 bytes (o200k_base: JSON 2.5, code 4, English 4.5–6); only
 * long runs of one character (spaces, "====") take fewer. A server's count below it is not believed.
 */
export const fewestTextTokens = (text: string): number => Math.floor(maxTextTokens(text) / 8);

/** At least `countMessagesTokens(messages)`, without tokenizing (a count made already is used). */
export function maxMessagesTokens(messages: readonly ChatMessage[]): number {
  let total = REPLY_PRIMING;
  for (const message of messages) total += cache.get(message) ?? messageTokens(message, maxTextTokens);
  return total;
}

const estimates = new WeakMap<ChatMessage, number>();

/**
 * About `countMessagesTokens(messages)`, without tokenizing: a message's exact count where one was
 * made (the compaction check makes them as the context fills), else a quarter of its UTF-8 bytes.
 * Each message is looked at once; after that a call costs a map lookup per message.
 */
export function estimateMessagesTokens(messages: readonly ChatMessage[]): number {
  let total = REPLY_PRIMING;
  for (const message of messages) {
    let tokens = cache.get(message) ?? estimates.get(message);
    if (tokens === undefined) {
      tokens = messageTokens(message, (text) => Math.ceil(maxTextTokens(text) / 4));
      estimates.set(message, tokens);
    }
    total += tokens;
  }
  return total;
}

/** At least `countToolSpecTokens(tools)`, without tokenizing. */
export function maxToolSpecTokens(tools: readonly ToolSpec[] | undefined): number {
  return tools && tools.length > 0 ? maxTextTokens(JSON.stringify(tools)) : 0;
}

/** Agents of one process mostly share their tool specs: their counts are kept, a few hundred at most. */
const specCounts = new Map<string, number>();

export function countToolSpecTokens(tools: readonly ToolSpec[] | undefined): number {
  if (!tools || tools.length === 0) return 0;
  const json = JSON.stringify(tools);
  let tokens = specCounts.get(json);
  if (tokens === undefined) {
    if (specCounts.size >= 256) specCounts.clear();
    tokens = countTextTokens(json);
    specCounts.set(json, tokens);
  }
  return tokens;
}
