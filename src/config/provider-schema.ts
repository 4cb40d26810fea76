/* A model provider of troupe.yaml: where its OpenAI-compatible endpoint is, and its models' prices. */
import { z } from "zod";
import { MAX_REPLY_CHARS } from "../limits.js";
import { positiveInt } from "./units.js";

export const modelInfoSchema = z.strictObject({
  contextWindow: positiveInt.optional(),
  /** US dollars per million input tokens. */
  inputPerMTok: z.number().nonnegative().default(0),
  outputPerMTok: z.number().nonnegative().default(0),
  cachedInputPerMTok: z.number().nonnegative().optional(),
  /** Overrides its provider's `strictTools` for this model. */
  strictTools: z.boolean().optional(),
  /** It takes images: those an MCP tool returns are sent to it as image parts (else it reads a line about each). */
  vision: z.boolean().optional(),
});
export type ModelInfo = z.infer<typeof modelInfoSchema>;

export const providerSchema = z.strictObject({
  /** Any OpenAI-compatible Chat Completions endpoint (OpenAI, vLLM, Ollama, LM Studio, llama.cpp). */
  baseURL: z.url().optional(),
  /** The environment variable that holds the API key. */
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name")
    .default("OPENAI_API_KEY"),
  /** Context window of models this provider serves that are not listed under `models`. */
  contextWindow: positiveInt.default(128_000),
  models: z.record(z.string().min(1), modelInfoSchema).default({}),
  /** `false` for a server that cannot stream (found on its own too, when it answers a stream with one completion). */
  stream: z.boolean().default(true),
  /** `false` for a server that refuses `stream_options` (found on its own too, from its 400). */
  streamUsage: z.boolean().default(true),
  /**
   * The most characters one reply may stream (text, reasoning and tool calls' arguments together);
   * past it the call is stopped and the turn fails.
   */
  maxReplyChars: positiveInt.default(MAX_REPLY_CHARS),
  /**
   * Send each tool whose schema fits strict mode (every property required, no others) with
   * `strict: true`, so that the server holds the model's arguments to it; other tools go without.
   * Off by default: not every server takes `strict`.
   */
  strictTools: z.boolean().default(false),
});
export type ProviderConfig = z.infer<typeof providerSchema>;
