import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import type { ModelInfo, ProviderConfig } from "../config/provider-schema.js";
import type { TroupeConfig } from "../config/schema.js";
import { type Logger, silentLogger } from "../log.js";
import { bodyText } from "./body-text.js";
import { CircuitBreaker, type CircuitOptions } from "./circuit-breaker.js";
import {
  CircuitOpenError,
  ContextLengthExceededError,
  ModelError,
  ModelNotConfiguredError,
  PartialOutputError,
  ReplyTooLongError,
} from "./errors.js";
import { costOf } from "./pricing.js";
import {
  backoffDelay,
  DEFAULT_RETRY,
  isRetryableStatus,
  parseRetryAfter,
  type RetryPolicy,
  sleep,
} from "./retry.js";
import {
  ReplyOverCapError,
  StreamCutError,
  streamCompletion,
  type WireSettings,
} from "./stream-completion.js";
import type { ModelRequest, ModelResponse } from "./types.js";

export interface ResolvedModel {
  /** As configured: `gpt-4o-mini` or `provider/model`. */
  id: string;
  provider: string;
  /** The name sent to the server. */
  name: string;
  contextWindow: number;
  prices: ModelInfo | undefined;
  /** Tools whose schema fits strict mode are sent with `strict: true`: the model's `strictTools`, else its provider's. */
  strictTools: boolean;
  /** It takes images (`vision` of its entry): a request's `images` are sent to it. */
  vision?: boolean;
}

export interface ModelRouterOptions {
  env?: NodeJS.ProcessEnv;
  retry?: Partial<RetryPolicy>;
  circuit?: Partial<CircuitOptions>;
  log?: Logger;
  /** Per-request timeout of the HTTP call. Default 600000. */
  timeoutMs?: number;
  /**
   * Makes the client of a provider; default `new OpenAI(settings)`. A test of the host can pass one
   * whose `fetch` answers in-process, with no HTTP server (the HTTP path is tested on its own).
   */
  client?: (settings: ClientSettings) => OpenAI;
}

/** What a provider's client is made with. */
export interface ClientSettings {
  apiKey: string;
  baseURL?: string;
  /** Troupe retries, never the client. */
  maxRetries: 0;
  timeout: number;
}

/**
 * Resolves model names to providers, and calls a model with retries (backoff with jitter, honouring
 * Retry-After, never once the answer has begun), a circuit breaker per model, and a fallback chain.
 * A reply longer than its provider's `maxReplyChars` is stopped there and fails the call.
 * One router per process: its clients and breakers are shared by every agent.
 */
export class ModelRouter {
  readonly #config: TroupeConfig;
  readonly #env: NodeJS.ProcessEnv;
  readonly #retry: RetryPolicy;
  readonly #circuitOptions: Partial<CircuitOptions>;
  readonly #log: Logger;
  readonly #timeoutMs: number;
  readonly #makeClient: (settings: ClientSettings) => OpenAI;
  #clients = new Map<string, OpenAI>();
  #wires = new Map<string, WireSettings>();
  #breakers = new Map<string, CircuitBreaker>();

  constructor(config: TroupeConfig, options: ModelRouterOptions = {}) {
    this.#config = config;
    this.#env = options.env ?? process.env;
    this.#retry = { ...DEFAULT_RETRY, ...options.retry };
    this.#circuitOptions = options.circuit ?? {};
    this.#log = (options.log ?? silentLogger).child({ component: "model" });
    this.#timeoutMs = options.timeoutMs ?? 600_000;
    this.#makeClient = options.client ?? ((settings) => new OpenAI(settings));
  }

  resolve(id: string): ResolvedModel {
    const providers = this.#config.providers;
    const slash = id.indexOf("/");
    let provider: string | undefined;
    let name = id;
    if (slash > 0 && id.slice(0, slash) in providers) {
      provider = id.slice(0, slash);
      name = id.slice(slash + 1);
    } else {
      provider = Object.keys(providers).find((p) => id in (providers[p]?.models ?? {}));
      provider ??= "openai" in providers ? "openai" : Object.keys(providers)[0];
    }
    const config = provider === undefined ? undefined : providers[provider];
    if (!provider || !config)
      throw new ModelNotConfiguredError(
        `no provider for model "${id}": add one under providers in troupe.yaml`,
      );
    const prices = config.models[name];
    return {
      id,
      provider,
      name,
      contextWindow: prices?.contextWindow ?? config.contextWindow,
      prices,
      strictTools: prices?.strictTools ?? config.strictTools,
      vision: prices?.vision ?? false,
    };
  }

  /** Checks that the provider of `id` can be reached with what is configured, without calling it. */
  assertConfigured(id: string): void {
    this.#client(this.resolve(id).provider);
  }

  breaker(id: string): CircuitBreaker {
    let breaker = this.#breakers.get(id);
    if (!breaker) {
      breaker = new CircuitBreaker(this.#circuitOptions);
      this.#breakers.set(id, breaker);
    }
    return breaker;
  }

  /** Tries each model of the chain in turn; throws the last failure when all fail. */
  async call(chain: readonly string[], request: ModelRequest): Promise<ModelResponse> {
    let lastError: unknown;
    for (const [position, id] of chain.entries()) {
      const last = position === chain.length - 1;
      const model = this.resolve(id);
      const breaker = this.breaker(id);
      if (!breaker.tryAcquire()) {
        lastError = new CircuitOpenError(`the circuit of ${id} is open after repeated failures`, id);
        if (!last) this.#log.warn({ model: id }, "circuit open; trying the next model");
        continue;
      }
      try {
        const response = await this.#withRetries(model, request);
        breaker.success();
        return response;
      } catch (error) {
        if (
          isAbort(error, request.signal) ||
          error instanceof ContextLengthExceededError ||
          error instanceof PartialOutputError ||
          error instanceof ReplyTooLongError
        ) {
          breaker.success();
          throw error;
        }
        breaker.failure();
        lastError = error;
        if (!last)
          this.#log.warn({ model: id, err: (error as Error).message }, "model failed; trying the next model");
      }
    }
    throw lastError;
  }

  /**
   * How a provider's server is spoken to: its troupe.yaml options, then what it was found to refuse
   * (remembered for the process: each is found once, with one request).
   */
  #wire(providerName: string): WireSettings {
    let wire = this.#wires.get(providerName);
    if (!wire) {
      const provider = this.#config.providers[providerName] as ProviderConfig;
      wire = {
        stream: provider.stream,
        streamUsage: provider.streamUsage,
        maxReplyChars: provider.maxReplyChars,
        strictTools: provider.strictTools,
        responseFormat: true,
      };
      this.#wires.set(providerName, wire);
    }
    return wire;
  }

  /** Whether a failure says the server refuses how it was asked, and the next try asks otherwise. */
  #adapt(providerName: string, wire: WireSettings, error: unknown): boolean {
    const status = error instanceof APIError ? error.status : undefined;
    const said = `${(error as Error)?.message ?? ""}`;
    if (wire.responseFormat && status === 400 && /response_format|json_schema/i.test(said)) {
      wire.responseFormat = false;
      this.#log.info(
        { provider: providerName },
        "the server refuses response_format: asking without it (the answer is still checked)",
      );
      return true;
    }
    if (wire.streamUsage && status === 400 && /stream_options/i.test(said)) {
      wire.streamUsage = false;
      this.#log.info({ provider: providerName }, "the server refuses stream_options: asking without it");
      return true;
    }
    if (
      wire.stream &&
      (status === 400 || status === 500) &&
      /stream/i.test(said) &&
      /tool|support/i.test(said)
    ) {
      wire.stream = false;
      this.#log.info(
        { provider: providerName },
        "the server cannot stream this: asking for whole completions",
      );
      return true;
    }
    return false;
  }

  async #withRetries(model: ResolvedModel, request: ModelRequest): Promise<ModelResponse> {
    const client = this.#client(model.provider);
    const wire = this.#wire(model.provider);
    for (let attempt = 0; ; attempt++) {
      try {
        // A model that does not take images is not sent them: each result says in a line what it held.
        const asked = model.vision || !request.images ? request : { ...request, images: undefined };
        const { answeredWhole, ...completion } = await streamCompletion(client, model.name, asked, {
          ...wire,
          strictTools: model.strictTools,
        });
        if (answeredWhole && wire.stream) {
          wire.stream = false;
          this.#log.info(
            { provider: model.provider },
            "the server answers streams whole: no longer streaming",
          );
        }
        const usage = { ...completion.usage, costUsd: costOf(completion.usage, model.prices) };
        return { ...completion, usage, model: model.id };
      } catch (error) {
        if (isAbort(error, request.signal)) throw error;
        const where = this.#where(model.provider, client);
        if (error instanceof ReplyOverCapError)
          throw new ReplyTooLongError(
            `the reply from ${where.baseURL} (provider ${where.provider}, model ${model.id}) passed ${error.cap} characters: stopped there, not asked again — providers.${where.provider}.maxReplyChars raises the cap`,
            model.id,
            { cause: error },
          );
        if (error instanceof StreamCutError) {
          const why = classify(error.cause, model.id, where).message;
          throw new PartialOutputError(
            `${why} — the stream broke after the answer had begun; not asked again, as a retry could repeat or lose it`,
            model.id,
            { cause: error.cause },
          );
        }
        const failure = classify(error, model.id, where);
        if (failure instanceof ContextLengthExceededError) throw failure;
        // Refused for how it was asked (stream_options, streaming with tools): asked otherwise at once.
        if (this.#adapt(model.provider, wire, error)) {
          attempt--;
          continue;
        }
        if (!isRetryableStatus(failure.status) || attempt >= this.#retry.maxRetries) throw failure;
        const retryAfter = error instanceof APIError ? parseRetryAfter(error.headers) : undefined;
        const delay = backoffDelay(this.#retry, attempt + 1, retryAfter);
        this.#log.info(
          { model: model.id, attempt: attempt + 1, delayMs: delay, status: failure.status },
          "retrying the model call",
        );
        request.onRetry?.({
          model: model.id,
          attempt: attempt + 1,
          maxRetries: this.#retry.maxRetries,
          delayMs: delay,
          error: failure.message,
        });
        await sleep(delay, request.signal);
      }
    }
  }

  /** Where a call went, for what a failure says: the server's URL, the provider, its key's variable. */
  #where(providerName: string, client: OpenAI): Endpoint {
    const provider = this.#config.providers[providerName] as ProviderConfig;
    return { provider: providerName, baseURL: client.baseURL, apiKeyEnv: provider.apiKeyEnv };
  }

  #client(providerName: string): OpenAI {
    let client = this.#clients.get(providerName);
    if (client) return client;
    const provider = this.#config.providers[providerName] as ProviderConfig;
    const key = this.#env[provider.apiKeyEnv];
    if (!key && !provider.baseURL) {
      throw new ModelNotConfiguredError(
        `no model server: set ${provider.apiKeyEnv} for OpenAI, or OPENAI_BASE_URL (providers.${providerName}.baseURL in troupe.yaml) for an OpenAI-compatible server`,
      );
    }
    client = this.#makeClient({
      apiKey: key || "not-needed",
      ...(provider.baseURL ? { baseURL: provider.baseURL } : {}),
      maxRetries: 0,
      timeout: this.#timeoutMs,
    });
    this.#clients.set(providerName, client);
    return client;
  }
}

function isAbort(error: unknown, signal: AbortSignal | undefined): boolean {
  return error instanceof APIUserAbortError || signal?.aborted === true;
}

const CONTEXT_LENGTH = /context[_ ]length|maximum context|too many tokens|context window/i;

interface Endpoint {
  provider: string;
  baseURL: string;
  apiKeyEnv: string;
}

/**
 * A failed call as one line that says what failed, where, and what to do: `401 from
 * http://…/v1 (provider openai, model m): … : check OPENAI_API_KEY or providers.openai.apiKeyEnv`,
 * `cannot reach http://…/v1 (provider openai): connection refused`.
 */
function classify(error: unknown, model: string, where: Endpoint): ModelError {
  const at = `${where.baseURL} (provider ${where.provider}, model ${model})`;
  if (error instanceof APIConnectionError && !(error instanceof APIConnectionTimeoutError)) {
    const reason = connectionReason(error);
    return new ModelError(`cannot reach ${at}: ${reason}`, model, { cause: error });
  }
  if (error instanceof APIError) {
    const code = typeof error.code === "string" ? error.code : "";
    const httpStatus = statusOf(error);
    if (httpStatus === 400 && (code === "context_length_exceeded" || CONTEXT_LENGTH.test(error.message))) {
      return new ContextLengthExceededError(`${model}: ${error.message}`, model, {
        cause: error,
        status: 400,
      });
    }
    const status = httpStatus ?? "error";
    const said = bodyText(error.message.replace(new RegExp(`^${error.status ?? "error"}\\s*`), ""));
    const mend =
      httpStatus === 401 || httpStatus === 403
        ? ` — check ${where.apiKeyEnv} or providers.${where.provider}.apiKeyEnv`
        : httpStatus === 404
          ? ` — check the model's name, and providers.${where.provider}.baseURL`
          : "";
    return new ModelError(`${status} from ${at}${said ? `: ${said}` : ""}${mend}`, model, {
      cause: error,
      status: httpStatus,
    });
  }
  // A stream cut mid-way surfaces as a plain error from the SDK's reader: a connection fault.
  return new ModelError(`${at}: ${error instanceof Error ? error.message : String(error)}`, model, {
    cause: error,
  });
}

/**
 * The HTTP status of a failure: the response's, or for an error event inside a 200 stream (vLLM's
 * `data: {"error":{…,"code":400}}`, OpenRouter's) the status its `code` names, so that a client
 * error there is not retried.
 */
function statusOf(error: APIError): number | undefined {
  if (error.status !== undefined) return error.status;
  const code = Number(error.code);
  return Number.isInteger(code) && code >= 400 && code <= 599 ? code : undefined;
}

/** Why a connection failed, from the system's error under the SDK's "Connection error.". */
function connectionReason(error: Error): string {
  let cause: unknown = error.cause;
  while (cause instanceof Error && cause.cause instanceof Error) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code) break;
    cause = cause.cause;
  }
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  const known: Record<string, string> = {
    ECONNREFUSED: "connection refused (is the server running?)",
    ENOTFOUND: "no such host",
    ECONNRESET: "the connection was reset",
    EHOSTUNREACH: "the host is unreachable",
  };
  return (code && known[code]) ?? (cause instanceof Error ? cause.message : error.message);
}
