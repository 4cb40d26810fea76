import { countMessagesTokens, countTextTokens } from "../model/tokens.js";
import type { ChatMessage } from "../model/types.js";

/**
 * What the scripted model server answers, and how a reply becomes a response body: a whole
 * completion (JSON) or the deltas of a stream (SSE), in the shapes OpenAI documents.
 */

export interface ScriptedToolCall {
  name: string;
  /** An object is sent as JSON. */
  arguments: Record<string, unknown> | string;
  id?: string;
}

export interface ReplyTiming {
  /** Before the response starts. */
  delayMs?: number;
  /** Between stream chunks (of a raw reply: between its events). */
  chunkDelayMs?: number;
}

/** A reply the server builds: text, reasoning and tool calls, streamed or whole as the request asks. */
export interface BuiltReply {
  text?: string;
  /** Streamed before the text, in `reasoningField` deltas; in the message of a whole completion. */
  reasoning?: string;
  /**
   * The field reasoning goes in: `reasoning_content` (vLLM, llama.cpp, DeepSeek; default) or
   * `reasoning` (Ollama, OpenRouter).
   */
  reasoningField?: "reasoning_content" | "reasoning";
  toolCalls?: ScriptedToolCall[];
  /** Deltas the text (and the reasoning) is split into. Default 3. */
  chunks?: number;
  /**
   * How tool calls arrive: arguments split over chunks with `index` (default); each whole in
   * one chunk; or split with no `index` (as some servers do).
   */
  toolCallStyle?: "split" | "whole" | "no-index";
  /** Default "tool_calls" with tool calls, else "stop". */
  finishReason?: "stop" | "tool_calls" | "length" | "content_filter";
  /** Leave the usage chunk out, as some servers do. */
  omitUsage?: boolean;
  /** End with `[DONE]` and no chunk carrying a finish_reason, as some servers do. */
  omitFinishReason?: boolean;
  /** Close the connection after this many chunks: a dropped stream. */
  dropAfterChunks?: number;
}

/**
 * A response body sent byte for byte, whatever was asked: a recorded-shape fixture. An SSE body is
 * written an event at a time (each flushed), so a client parses it across reads as it would a server's.
 */
export interface RawReply {
  raw: string;
  /** Default `text/event-stream`. */
  contentType?: string;
  /** Default 200. */
  status?: number;
}

export interface ErrorReply {
  error: { status: number; message?: string; code?: string; retryAfter?: string };
}

export type ScriptedReply = ReplyTiming & (BuiltReply | RawReply | ErrorReply);

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  tools?: Array<{
    type: "function";
    function: { name: string; description?: string; parameters?: unknown; strict?: boolean };
  }>;
  tool_choice?: "auto" | "required" | "none" | { type: "function"; function: { name: string } };
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  [key: string]: unknown;
}

export type Delta = Record<string, unknown>;

/** A message as text for counting: a user message of parts (text and images) counts its text, and 85 a picture. */
function asText(message: ChatMessage): ChatMessage {
  const content = (message as { content: unknown }).content;
  if (!Array.isArray(content)) return message;
  const parts = content as Array<{ type: string; text?: string }>;
  const text = parts
    .map((part) => (part.type === "text" ? (part.text ?? "") : " ".repeat(85 * 4)))
    .join("\n");
  return { ...message, content: text } as ChatMessage;
}

/** A built reply as what any response needs: its calls with ids, finish reason and usage. */
export function replyParts(reply: BuiltReply, body: ChatRequest, callPrefix: string) {
  const toolCalls = (reply.toolCalls ?? []).map((call, i) => ({
    id: call.id ?? `call_${callPrefix}_${i}`,
    name: call.name,
    arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
  }));
  const text = reply.text ?? "";
  const reasoning = reply.reasoning ?? "";
  const finishReason = reply.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop");
  const promptTokens =
    countMessagesTokens(body.messages.map(asText)) +
    (body.tools ? countTextTokens(JSON.stringify(body.tools)) : 0);
  const completionTokens =
    countTextTokens(reasoning) +
    countTextTokens(text) +
    toolCalls.reduce((n, c) => n + countTextTokens(c.name + c.arguments), 0);
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
  return { toolCalls, text, reasoning, finishReason, usage };
}

/** The body of a whole completion. */
export function wholeCompletion(
  reply: BuiltReply,
  parts: ReturnType<typeof replyParts>,
  id: string,
  model: string,
): Record<string, unknown> {
  const { toolCalls, text, reasoning, finishReason, usage } = parts;
  return {
    id,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: text || null,
          ...(reasoning ? { [reply.reasoningField ?? "reasoning_content"]: reasoning } : {}),
          ...(toolCalls.length > 0
            ? {
                tool_calls: toolCalls.map((c) => ({
                  id: c.id,
                  type: "function",
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        },
        finish_reason: finishReason,
      },
    ],
    ...(reply.omitUsage ? {} : { usage }),
  };
}

/** The deltas of a streamed reply, after the role chunk: reasoning, text, then tool calls. */
export function streamDeltas(reply: BuiltReply, parts: ReturnType<typeof replyParts>): Delta[] {
  const chunks = reply.chunks ?? 3;
  const field = reply.reasoningField ?? "reasoning_content";
  const thinking: Delta[] = splitEvenly(parts.reasoning, chunks).map((part) => ({ [field]: part }));
  return [...thinking, ...streamChunks(parts.text, parts.toolCalls, chunks, reply.toolCallStyle ?? "split")];
}

/** A raw SSE body cut into its events (each with its blank line), to be written one at a time. */
export function sseEvents(raw: string): string[] {
  return raw.split(/(?<=\r?\n\r?\n)/).filter((part) => part.length > 0);
}

function streamChunks(
  text: string,
  calls: Array<{ id: string; name: string; arguments: string }>,
  textChunks: number,
  style: "split" | "whole" | "no-index",
): Delta[] {
  const deltas: Delta[] = splitEvenly(text, textChunks).map((content) => ({ content }));
  calls.forEach((call, index) => {
    const indexField = style === "no-index" ? {} : { index };
    if (style === "whole") {
      deltas.push({
        tool_calls: [
          {
            ...indexField,
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          },
        ],
      });
      return;
    }
    deltas.push({
      tool_calls: [
        { ...indexField, id: call.id, type: "function", function: { name: call.name, arguments: "" } },
      ],
    });
    for (const part of splitEvenly(call.arguments, 3))
      deltas.push({ tool_calls: [{ ...indexField, function: { arguments: part } }] });
  });
  // Interleave the argument chunks of several calls by index, as parallel tool calls arrive.
  if (style === "split" && calls.length > 1) return interleave(deltas);
  return deltas;
}

function interleave(deltas: Delta[]): Delta[] {
  const text = deltas.filter((d) => "content" in d);
  const byCall = new Map<number, Delta[]>();
  for (const delta of deltas) {
    const call = (delta.tool_calls as Array<{ index: number }> | undefined)?.[0];
    if (!call) continue;
    const list = byCall.get(call.index) ?? [];
    list.push(delta);
    byCall.set(call.index, list);
  }
  const out = [...text];
  const lists = [...byCall.values()];
  for (let i = 0; lists.some((list) => i < list.length); i++) {
    for (const list of lists) if (list[i]) out.push(list[i] as Delta);
  }
  return out;
}

function splitEvenly(text: string, parts: number): string[] {
  if (!text) return [];
  const size = Math.max(1, Math.ceil(text.length / Math.max(1, parts)));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}
