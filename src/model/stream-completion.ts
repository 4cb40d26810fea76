import { APIConnectionError, APIUserAbortError, type default as OpenAI } from "openai";
import { TroupeError } from "../errors.js";
import { MAX_REPLY_CHARS } from "../limits.js";
import { countMessagesTokens, countTextTokens, countToolSpecTokens, fewestTextTokens } from "./tokens.js";
import { ToolCallAssembler, type ToolCallDelta } from "./tool-call-assembler.js";
import { toolParams } from "./tool-params.js";
import type { AssistantMessage, ChatMessage, FinishReason, ModelRequest, Usage } from "./types.js";

export interface StreamedCompletion {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage: Omit<Usage, "costUsd">;
  truncatedToolCalls: boolean;
  reasoning?: string;
  /** The server answered a streaming request with a whole completion: it does not stream. */
  answeredWhole?: boolean;
}

/**
 * The stream broke after the answer had begun (text, reasoning or a tool call's fragment): asking
 * again would repeat what was shown, or, from a server whose script moved on, lose the answer.
 */
export class StreamCutError extends TroupeError {
  override name = "StreamCutError";
}

/**
 * The reply passed `cap` characters (text, reasoning and tool calls' arguments together): the stream
 * was aborted there, and nothing past the cap was handed on.
 */
export class ReplyOverCapError extends TroupeError {
  override name = "ReplyOverCapError";
  constructor(readonly cap: number) {
    super(`the reply passed ${cap} characters`);
  }
}

/** How a provider's server is spoken to (troupe.yaml's provider options, and what it was found to refuse). */
export interface WireSettings {
  /** Stream the answer (default); `false` asks for the whole completion at once. */
  stream: boolean;
  /** Ask for the usage in the stream's last chunk (`stream_options`); some servers refuse it. */
  streamUsage: boolean;
  /** The most characters a reply may stream (text, reasoning and tool calls' arguments together). */
  maxReplyChars: number;
  /** Send tools whose schema fits strict mode with `strict: true` (troupe.yaml's `strictTools`). */
  strictTools: boolean;
  /** Send an answer's schema as `response_format`; a server found to refuse it is not sent it again. */
  responseFormat: boolean;
}

const DEFAULT_WIRE: WireSettings = {
  stream: true,
  streamUsage: true,
  maxReplyChars: MAX_REPLY_CHARS,
  strictTools: false,
  responseFormat: true,
};

/**
 * One Chat Completions call: streamed, text deltas go to `onDelta` and reasoning deltas to
 * `onReasoning` as they arrive, and tool calls are assembled from their fragments; or, for a server
 * that does not stream (asked not to, or answering a streaming request with a whole completion), the
 * whole answer at once, its reasoning and text given in one piece each. A server that sends no usage
 * gets it counted here, and one whose count is below what streamed gets at least
 * `fewestTextTokens` of it. A stream that breaks once the answer has begun throws `StreamCutError`.
 * A reply longer than `wire.maxReplyChars` throws `ReplyOverCapError`: a stream is aborted at the
 * delta that passes it, which is not handed on.
 */
export async function streamCompletion(
  client: OpenAI,
  model: string,
  request: ModelRequest,
  wire: WireSettings = DEFAULT_WIRE,
): Promise<StreamedCompletion> {
  const body = {
    model,
    messages: withImages(
      request.messages.map(sendable) as OpenAI.ChatCompletionMessageParam[],
      request.images,
    ),
    ...toolParams(request.tools, wire.strictTools, request.toolChoice),
    ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
    ...(request.responseSchema && wire.responseFormat
      ? {
          response_format: {
            type: "json_schema" as const,
            json_schema: { name: "output", schema: request.responseSchema },
          },
        }
      : {}),
  };
  const options = request.signal ? { signal: request.signal } : {};
  if (!wire.stream)
    return wholeCompletion(
      await client.chat.completions.create({ ...body, stream: false }, options),
      request,
      wire.maxReplyChars,
    );
  const { data: stream, response } = await client.chat.completions
    .create(
      { ...body, stream: true, stream_options: wire.streamUsage ? { include_usage: true } : undefined },
      options,
    )
    .withResponse();
  // It ignored `stream: true`: the body is one completion, not events.
  if (/application\/json/i.test(response.headers.get("content-type") ?? "")) {
    const whole = wholeCompletion(
      (await response.json()) as OpenAI.ChatCompletion,
      request,
      wire.maxReplyChars,
    );
    return { ...whole, answeredWhole: true };
  }
  let chunks = 0;
  let text = "";
  let reasoning = "";
  let refusal = "";
  let finish: string | undefined;
  let reported: OpenAI.CompletionUsage | undefined;
  let streamed = 0;
  const assembler = new ToolCallAssembler();
  try {
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) reported = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      streamed += deltaChars(choice.delta);
      if (streamed > wire.maxReplyChars) {
        stream.controller.abort();
        throw new ReplyOverCapError(wire.maxReplyChars);
      }
      const thought = reasoningOf(choice.delta);
      if (thought) {
        reasoning += thought;
        request.onReasoning?.(thought);
      }
      const content = choice.delta?.content;
      if (content) {
        text += content;
        request.onDelta?.(content);
      }
      if (typeof choice.delta?.refusal === "string") refusal += choice.delta.refusal;
      for (const fragment of choice.delta?.tool_calls ?? []) assembler.add(fragment);
      if (choice.delta?.function_call)
        assembler.add({ index: LEGACY_CALL, function: choice.delta.function_call });
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  } catch (error) {
    if (error instanceof ReplyOverCapError) throw error;
    const begun = text !== "" || reasoning !== "" || refusal !== "" || assembler.size > 0;
    if (begun && !request.signal?.aborted)
      throw new StreamCutError(`the stream broke after the answer had begun: ${(error as Error).message}`, {
        cause: error,
      });
    throw error;
  }
  // The SDK ends the iteration quietly when the signal aborts. A connection that drops throws (the
  // body is cut off); one that ends without a finish_reason (some servers send none before
  // `[DONE]`) was a whole answer: it ended as its parts say.
  if (request.signal?.aborted) throw new APIUserAbortError();
  // No event at all is no answer (a body that was not a stream), never an empty success.
  if (chunks === 0) throw new APIConnectionError({ message: "the server's stream held no answer" });
  return ended({ text, reasoning, refusal }, assembler, finish, reported, request);
}

/**
 * Where a legacy `function_call` (one call, no id, before `tool_calls`) is assembled: apart from
 * every `tool_calls` index, and run as a tool call like any other.
 */
const LEGACY_CALL = -1;

/**
 * A message as a strict server takes it: a refusal goes as the turn's text (not every server knows
 * `refusal`); an assistant turn that said nothing and called nothing (a call cut off by the length
 * limit, whose call was dropped) goes with a short text in place of `content: null`, which needs
 * `tool_calls` beside it; an empty `tool_calls` is left out.
 */
function sendable(message: ChatMessage): ChatMessage {
  if (message.role !== "assistant") return message;
  const { refusal, ...said } = message;
  if (refusal && !said.content) said.content = refusal;
  if ((said.tool_calls?.length ?? 0) > 0) return said;
  const { tool_calls: _none, ...rest } = said;
  return rest.content ? rest : { ...rest, content: NOTHING_SAID };
}

const NOTHING_SAID = "(no text)";

/**
 * The messages with each call's images after the results they came with: a user message (tool
 * messages take no images) naming the calls, then their images as `image_url` parts (data URLs),
 * after the last of the run of tool results it follows.
 */
function withImages(
  messages: OpenAI.ChatCompletionMessageParam[],
  images: ModelRequest["images"],
): OpenAI.ChatCompletionMessageParam[] {
  if (!images?.length) return messages;
  const byCall = new Map(images.map((entry) => [entry.callId, entry.images]));
  const out: OpenAI.ChatCompletionMessageParam[] = [];
  let pending: { callId: string; images: NonNullable<ModelRequest["images"]>[number]["images"] }[] = [];
  const flush = () => {
    if (pending.length === 0) return;
    out.push({
      role: "user",
      content: [
        {
          type: "text",
          text: `The images the tool calls returned (${pending.map((p) => p.callId).join(", ")}):`,
        },
        ...pending.flatMap((p) =>
          p.images.map((image) => ({
            type: "image_url" as const,
            image_url: { url: `data:${image.mimeType};base64,${image.data}` },
          })),
        ),
      ],
    });
    pending = [];
  };
  for (const message of messages) {
    if (message.role !== "tool") flush();
    out.push(message);
    const found = message.role === "tool" ? byCall.get(message.tool_call_id) : undefined;
    if (found && message.role === "tool") pending.push({ callId: message.tool_call_id, images: found });
  }
  flush();
  return out;
}

/** A whole completion (no stream) as a streamed one would have ended. */
function wholeCompletion(
  completion: OpenAI.ChatCompletion,
  request: ModelRequest,
  cap: number,
): StreamedCompletion {
  const choice = completion.choices?.[0];
  if (!choice?.message) throw new APIConnectionError({ message: "the server's answer held no message" });
  if (deltaChars(choice.message) > cap) throw new ReplyOverCapError(cap);
  const text = typeof choice.message.content === "string" ? choice.message.content : "";
  const reasoning = reasoningOf(choice.message) ?? "";
  const refusal = typeof choice.message.refusal === "string" ? choice.message.refusal : "";
  if (reasoning) request.onReasoning?.(reasoning);
  if (text) request.onDelta?.(text);
  const assembler = new ToolCallAssembler();
  // Each call at its own index: calls a server gives no id stay apart.
  for (const [index, call] of (choice.message.tool_calls ?? []).entries())
    if (call.type === "function") assembler.add({ index, id: call.id, function: call.function });
  if (choice.message.function_call)
    assembler.add({ index: LEGACY_CALL, function: choice.message.function_call });
  return ended(
    { text, reasoning, refusal },
    assembler,
    choice.finish_reason ?? undefined,
    completion.usage,
    request,
  );
}

/**
 * The characters a delta or a whole message carries toward the reply's cap: its text, its refusal,
 * its reasoning and its tool calls' fragments (a legacy `function_call`'s too) (ids, names and
 * arguments; what is not a string, as its JSON).
 */
function deltaChars(part: object | undefined): number {
  const {
    content,
    refusal,
    tool_calls: calls,
    function_call: legacy,
  } = (part ?? {}) as {
    content?: unknown;
    refusal?: unknown;
    tool_calls?: unknown;
    function_call?: ToolCallDelta["function"];
  };
  let chars = charsOf(content) + charsOf(refusal) + (reasoningOf(part)?.length ?? 0);
  const all = [
    ...(Array.isArray(calls) ? (calls as ToolCallDelta[]) : []),
    ...(legacy ? [{ function: legacy }] : []),
  ];
  for (const call of all)
    chars += charsOf(call?.id) + charsOf(call?.function?.name) + charsOf(call?.function?.arguments);
  return chars;
}

const charsOf = (value: unknown): number =>
  typeof value === "string" ? value.length : value == null ? 0 : (JSON.stringify(value)?.length ?? 0);

/**
 * The reasoning a delta or message carries: `reasoning_content` (vLLM, llama.cpp, DeepSeek) or
 * `reasoning` (Ollama, OpenRouter, newer vLLM). One of them only, for a server that sends both.
 */
function reasoningOf(part: object | undefined): string | undefined {
  const { reasoning_content: content, reasoning } = (part ?? {}) as Record<string, unknown>;
  if (typeof content === "string" && content) return content;
  return typeof reasoning === "string" && reasoning ? reasoning : undefined;
}

/**
 * The answer as it ended: with no finish_reason, as its parts say (tool_calls when calls were
 * assembled, else stop); `stop` with calls (Gemini, Ollama) is `tool_calls`. A call cut off by the
 * length limit is never run: its arguments are incomplete. The reasoning stays out of the message;
 * a refusal is the message's `refusal`.
 */
function ended(
  said: { text: string; reasoning: string; refusal: string },
  assembler: ToolCallAssembler,
  finish: string | undefined,
  reported: OpenAI.CompletionUsage | undefined,
  request: ModelRequest,
): StreamedCompletion {
  const { text, reasoning, refusal } = said;
  const all = assembler.calls();
  const stated = toFinishReason(finish ?? (all.length > 0 ? "tool_calls" : "stop"));
  const finishReason = stated === "stop" && all.length > 0 ? "tool_calls" : stated;
  const truncatedToolCalls = finishReason === "length" && all.length > 0;
  const calls = truncatedToolCalls ? [] : all;
  const message: AssistantMessage = { role: "assistant", content: text || null };
  if (calls.length > 0) message.tool_calls = calls;
  if (refusal) message.refusal = refusal;
  return {
    message,
    finishReason,
    usage: usageOf(reported, request, text + refusal + reasoning, all),
    truncatedToolCalls,
    ...(reasoning ? { reasoning } : {}),
  };
}

/**
 * The usage the server reported, or counted here when it reported none. A reported output below
 * `fewestTextTokens` of what streamed is not believed (a budget would not hold): that floor is
 * counted instead.
 */
function usageOf(
  reported: OpenAI.CompletionUsage | undefined,
  request: ModelRequest,
  text: string,
  calls: AssistantMessage["tool_calls"] & object,
): Omit<Usage, "costUsd"> {
  const said = calls.map((c) => c.function.name + c.function.arguments);
  if (reported)
    return {
      inputTokens: reported.prompt_tokens,
      outputTokens: Math.max(reported.completion_tokens || 0, fewestTextTokens(text + said.join(""))),
      cachedInputTokens: reported.prompt_tokens_details?.cached_tokens ?? 0,
    };
  return {
    inputTokens: countMessagesTokens(request.messages) + countToolSpecTokens(request.tools),
    outputTokens: countTextTokens(text) + said.reduce((n, call) => n + countTextTokens(call), 0),
    cachedInputTokens: 0,
  };
}

function toFinishReason(reason: string | undefined): FinishReason {
  switch (reason) {
    case "stop":
    case "tool_calls":
    case "length":
    case "content_filter":
      return reason;
    case "function_call":
      return "tool_calls";
    case "error":
    case "abort":
      return "error";
    default:
      return reason === undefined ? "stop" : "other";
  }
}
