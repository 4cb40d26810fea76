import { z } from "zod";
import type { FinishReason, Usage } from "../events/agent-events.js";

export type { FinishReason, Usage };

/**
 * Conversation messages in the Chat Completions shape, so they go to any OpenAI-compatible server
 * as they are, and are stored in snapshots as plain JSON (the schemas validate restored ones).
 */
export const toolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof toolCallSchema>;

export const chatMessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content: z.string() }),
  z.object({ role: z.literal("user"), content: z.string() }),
  z.object({
    role: z.literal("assistant"),
    content: z.string().nullable(),
    tool_calls: z.array(toolCallSchema).optional(),
    /** The model declined to answer (the server's `refusal`): this is its whole answer. */
    refusal: z.string().optional(),
  }),
  z.object({ role: z.literal("tool"), tool_call_id: z.string(), content: z.string() }),
]);
export type ChatMessage = z.infer<typeof chatMessageSchema>;
export type AssistantMessage = Extract<ChatMessage, { role: "assistant" }>;
export type ToolMessage = Extract<ChatMessage, { role: "tool" }>;

/** A tool as the model sees it. */
export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export const ZERO_USAGE: Usage = Object.freeze({
  inputTokens: 0,
  outputTokens: 0,
  cachedInputTokens: 0,
  costUsd: 0,
});

export function addUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    costUsd: a.costUsd + b.costUsd,
  };
}

/**
 * How the model may use the tools it is given: `auto` (it decides), `required` (it must call one),
 * `none` (it may not), or the name of the one tool it must call.
 */
export type ToolChoice = "auto" | "required" | "none" | (string & {});

export interface ModelRequest {
  messages: ChatMessage[];
  /** Absent or empty: the model may not call tools (the final answer of a budget or loop stop). */
  tools?: ToolSpec[];
  /** Sent only with tools; a tool named that is not among them leaves the choice to the model. */
  toolChoice?: ToolChoice;
  /**
   * The JSON Schema the answer's text must fit (an agent's `output`): sent as `response_format`
   * (`json_schema`) to a server that takes it; the answer is checked here either way.
   */
  responseSchema?: Record<string, unknown>;
  /**
   * Images tool calls returned, by call: sent to a model that takes images (`vision`) as a user
   * message of image parts after those calls' results; left out for any other (each result says
   * in a line what it held).
   */
  images?: CallImages[];
  /** The most tokens the reply may have (`max_tokens`); absent: the server's own limit. */
  maxTokens?: number;
  signal?: AbortSignal;
  /**
   * Text as it streams. Once the answer has begun (text, reasoning or a tool call), the request is
   * never retried.
   */
  onDelta?: (text: string) => void;
  /** The model's reasoning as it streams (`reasoning_content` or `reasoning`), before or between its text. */
  onReasoning?: (text: string) => void;
  /** A call that failed and will be made again, after `delayMs`. */
  onRetry?: (retry: ModelRetry) => void;
}

/** An image a tool returned: its type and its bytes, base64. */
export interface ToolImage {
  mimeType: string;
  data: string;
}

export interface CallImages {
  callId: string;
  images: ToolImage[];
}

export interface ModelRetry {
  model: string;
  /** 1 for the first retry. */
  attempt: number;
  maxRetries: number;
  delayMs: number;
  /** What failed, in one line: `503 from http://…/v1 (provider openai)`. */
  error: string;
}

export interface ModelResponse {
  message: AssistantMessage;
  finishReason: FinishReason;
  usage: Usage;
  /** The model that answered (a fallback, maybe). */
  model: string;
  /** `finish_reason: "length"` cut a tool call short; it was dropped from `message`. */
  truncatedToolCalls: boolean;
  /**
   * The turn's reasoning, when the server sent any. Never part of `message`: servers refuse it, or
   * take it as the model's words, when it is sent back.
   */
  reasoning?: string;
}

/** What the agent loop needs from a model: one streamed completion. */
export type ModelCall = (request: ModelRequest) => Promise<ModelResponse>;
