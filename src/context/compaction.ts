import {
  countMessagesTokens,
  countMessageTokens,
  countTextTokens,
  maxMessagesTokens,
} from "../model/tokens.js";
import type { ChatMessage, Usage } from "../model/types.js";
import { addUsage, ZERO_USAGE } from "../model/types.js";

export interface CompactionSettings {
  contextWindow: number;
  /** Compact when a request would fill more than this share of the window. Default 0.8. */
  threshold?: number;
  /** Aim for this share after compacting. Default 0.5. */
  target?: number;
  /** Recent messages kept verbatim take at most this share of the window. Default 0.25. */
  keepRecent?: number;
  /** Tool outputs longer than this, outside the recent part, are pruned first. Default 200 tokens. */
  pruneOver?: number;
}

export type Summarize = (
  messages: ChatMessage[],
  signal?: AbortSignal,
) => Promise<{ text: string; usage: Usage }>;

export interface CompactionResult {
  messages: ChatMessage[];
  usage: Usage;
  tokensBefore: number;
  tokensAfter: number;
  pruned: number;
  summarized: number;
}

export const SUMMARY_PREFIX = "Summary of the conversation so far (older turns were compacted):";

/** Tokens a request holds besides its messages (tool specs, the reply): exact, or bounded and counted on demand. */
export type Overhead = number | { atMost: number; exactly: () => number };

/** Whether a request of these messages (plus `overhead`) needs compacting first. */
export function overThreshold(
  messages: readonly ChatMessage[],
  overhead: Overhead,
  settings: CompactionSettings,
): boolean {
  const limit = settings.contextWindow * (settings.threshold ?? 0.8);
  const atMost = typeof overhead === "number" ? overhead : overhead.atMost;
  // Far from the limit there is no need to tokenize: the bounds alone say so.
  if (maxMessagesTokens(messages) + atMost <= limit) return false;
  const exactly = typeof overhead === "number" ? overhead : overhead.exactly();
  return countMessagesTokens(messages) + exactly > limit;
}

/**
 * Makes room in a conversation: first old bulky tool outputs are pruned (no model call); if that is
 * not enough, older turns are summarised by the model, in chunks that each fit its window. The
 * system prompt, the task and the most recent turns stay verbatim, and the cut never falls between
 * a tool call and its result.
 */
export async function compactMessages(
  messages: readonly ChatMessage[],
  settings: CompactionSettings,
  summarize: Summarize,
  signal?: AbortSignal,
): Promise<CompactionResult> {
  const window = settings.contextWindow;
  const targetTokens = window * (settings.target ?? 0.5);
  const tokensBefore = countMessagesTokens(messages);
  const cut = recentStart(messages, window * (settings.keepRecent ?? 0.25));
  const head = leadingMessages(messages, cut);

  let pruned = 0;
  const working = messages.map((message, i) => {
    if (i >= cut || message.role !== "tool") return message;
    const tokens = countMessageTokens(message);
    if (tokens <= (settings.pruneOver ?? 200)) return message;
    pruned++;
    return {
      ...message,
      content: `[output pruned to save context: ${tokens} tokens; run the tool again if you need it]`,
    };
  });
  const older = working.slice(head.length, cut);
  // Nothing between the kept head and the recent part: there is nothing to summarise.
  if (countMessagesTokens(working) <= targetTokens || older.length === 0) {
    return {
      messages: working,
      usage: { ...ZERO_USAGE },
      tokensBefore,
      tokensAfter: countMessagesTokens(working),
      pruned,
      summarized: 0,
    };
  }

  let summary = "";
  let usage: Usage = { ...ZERO_USAGE };
  // Each chunk, with the summary so far, must fit in what the summariser can read.
  const chunkBudget = window * 0.5;
  for (const chunk of chunks(older, chunkBudget)) {
    const input: ChatMessage[] = summary
      ? [{ role: "user", content: `${SUMMARY_PREFIX}\n${summary}` }, ...chunk]
      : chunk;
    const result = await summarize(input, signal);
    summary = result.text;
    usage = addUsage(usage, result.usage);
  }
  const compacted: ChatMessage[] = [
    ...head,
    { role: "user", content: `${SUMMARY_PREFIX}\n${summary}` },
    ...working.slice(cut),
  ];
  return {
    messages: compacted,
    usage,
    tokensBefore,
    tokensAfter: countMessagesTokens(compacted),
    pruned,
    summarized: older.length,
  };
}

/** The system prompt and the first task, kept verbatim (the task only while it is small). */
function leadingMessages(messages: readonly ChatMessage[], cut: number): ChatMessage[] {
  const head: ChatMessage[] = [];
  if (messages[0]?.role === "system") head.push(messages[0]);
  const task = messages[head.length];
  if (
    task?.role === "user" &&
    head.length < cut &&
    countMessageTokens(task) < 500 &&
    !task.content.startsWith(SUMMARY_PREFIX)
  ) {
    head.push(task);
  }
  return head;
}

/**
 * Where the verbatim recent part starts: as far back as `budget` tokens allow, moved forward to a
 * message that is not a tool result, so no call is parted from its result. At least the last turn.
 */
function recentStart(messages: readonly ChatMessage[], budget: number): number {
  let start = messages.length;
  let tokens = 0;
  while (start > 1) {
    const next = countMessageTokens(messages[start - 1] as ChatMessage);
    if (tokens + next > budget && start < messages.length) break;
    tokens += next;
    start--;
  }
  while (start < messages.length && messages[start]?.role === "tool") start++;
  if (start >= messages.length) {
    // The last message alone is over the budget: keep its whole turn anyway.
    start = messages.length - 1;
    while (start > 1 && messages[start]?.role === "tool") start--;
  }
  return Math.max(1, start);
}

/** Splits messages into runs under `budget` tokens, never between a call and its results. */
function* chunks(messages: ChatMessage[], budget: number): Generator<ChatMessage[]> {
  let current: ChatMessage[] = [];
  let tokens = 0;
  for (const message of messages) {
    const size = Math.min(countMessageTokens(message), budget);
    const boundary = message.role !== "tool";
    if (boundary && current.length > 0 && tokens + size > budget) {
      yield current;
      current = [];
      tokens = 0;
    }
    current.push(size < countMessageTokens(message) ? clip(message, budget) : message);
    tokens += size;
  }
  if (current.length > 0) yield current;
}

/** A message too large for the summariser alone is cut to fit. */
function clip(message: ChatMessage, budget: number): ChatMessage {
  const content = message.content ?? "";
  const keep = Math.floor((content.length * budget) / Math.max(1, countTextTokens(content))) - 40;
  return {
    ...message,
    content: `${content.slice(0, Math.max(0, keep))}\n[…cut to fit the summary]`,
  } as ChatMessage;
}
