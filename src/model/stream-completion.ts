import { APIUserAbortError, type default as OpenAI } from "openai";
import { countMessagesTokens, countTextTokens, countToolSpecTokens } from "../context/tokens.js";
import { ToolCallAssembler } from "./tool-call-assembler.js";
import type { AssistantMessage, FinishReason, ModelRequest, Usage } from "./types.js";

export interface StreamedCompletion {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage: Omit<Usage, "costUsd">;
  truncatedToolCalls: boolean;
}

/**
 * One streamed Chat Completions call: text deltas go to `onDelta` as they arrive, tool calls are
 * assembled from their fragments. A server that sends no usage gets it counted here.
 */
export async function streamCompletion(
  client: OpenAI,
  model: string,
  request: ModelRequest,
): Promise<StreamedCompletion> {
  const tools = request.tools?.length
    ? request.tools.map((tool) => ({ type: "function" as const, function: tool }))
    : undefined;
  const stream = await client.chat.completions.create(
    {
      model,
      messages: request.messages as OpenAI.ChatCompletionMessageParam[],
      ...(tools ? { tools } : {}),
      stream: true,
      stream_options: { include_usage: true },
    },
    request.signal ? { signal: request.signal } : {},
  );
  let text = "";
  let finish: string | undefined;
  let reported: OpenAI.CompletionUsage | undefined;
  const assembler = new ToolCallAssembler();
  for await (const chunk of stream) {
    if (chunk.usage) reported = chunk.usage;
    const choice = chunk.choices[0];
    if (!choice) continue;
    const content = choice.delta?.content;
    if (content) {
      text += content;
      request.onDelta?.(content);
    }
    for (const fragment of choice.delta?.tool_calls ?? []) assembler.add(fragment);
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  // The SDK ends the iteration quietly when the signal aborts. A connection that drops throws (the
  // body is cut off); one that ends without a finish_reason (some servers send none before
  // `[DONE]`) was a whole answer: it ended as its parts say.
  if (request.signal?.aborted) throw new APIUserAbortError();
  finish ??= assembler.size > 0 ? "tool_calls" : "stop";

  let calls = assembler.calls();
  const finishReason = toFinishReason(finish);
  const truncatedToolCalls = finishReason === "length" && calls.length > 0;
  // A call cut off by the length limit is never run: its arguments are incomplete.
  if (truncatedToolCalls) calls = [];
  const message: AssistantMessage = { role: "assistant", content: text || null };
  if (calls.length > 0) message.tool_calls = calls;

  const usage = reported
    ? {
        inputTokens: reported.prompt_tokens,
        outputTokens: reported.completion_tokens,
        cachedInputTokens: reported.prompt_tokens_details?.cached_tokens ?? 0,
      }
    : {
        inputTokens: countMessagesTokens(request.messages) + countToolSpecTokens(request.tools),
        outputTokens:
          countTextTokens(text) +
          assembler.calls().reduce((n, c) => n + countTextTokens(c.function.name + c.function.arguments), 0),
        cachedInputTokens: 0,
      };
  return { message, finishReason, usage, truncatedToolCalls };
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
    default:
      return reason === undefined ? "stop" : "other";
  }
}
