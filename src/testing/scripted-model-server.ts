import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type ChatRequest,
  type Delta,
  type RawReply,
  replyParts,
  type ScriptedReply,
  sseEvents,
  streamDeltas,
  wholeCompletion,
} from "./scripted-reply.js";

export type {
  BuiltReply,
  ChatRequest,
  ErrorReply,
  RawReply,
  ReplyTiming,
  ScriptedReply,
  ScriptedToolCall,
} from "./scripted-reply.js";

/**
 * An OpenAI-compatible Chat Completions server that plays scripted replies over real HTTP (SSE or
 * plain JSON), for tests and for `troupe demo`. Replies are chosen by rules, so concurrent agents get
 * deterministic answers; a reply is built (text, reasoning, tool calls, errors) or raw (a fixture's
 * body sent byte for byte); every request is recorded; `assertComplete()` fails when a scripted
 * reply was never asked for or a request found no reply.
 */

export interface RequestMatch {
  /** The system message includes this. */
  system?: string | RegExp;
  /** The last user message includes this. */
  lastUser?: string | RegExp;
  /** The 1-based number of this model call in its conversation (assistant messages so far + 1). */
  turn?: number;
  /** Whether the request offers tools. */
  withTools?: boolean;
  /** Any other condition. */
  where?: (request: ChatRequest) => boolean;
}

export interface ScriptRule {
  match?: RequestMatch;
  reply: ScriptedReply | ((request: ChatRequest) => ScriptedReply);
  /** How many requests this rule answers; Infinity for all. Default 1. */
  times?: number;
}

interface LiveRule extends ScriptRule {
  remaining: number;
}

export interface RecordedRequest {
  body: ChatRequest;
  headers: IncomingMessage["headers"];
  /** The rule that answered, or -1. */
  rule: number;
  receivedAt: number;
  /** How long the server spent on it, from the request's body read to the response's end (ms). */
  servedMs?: number;
}

/** Ways real servers differ from OpenAI's, for the conformance tests. */
export interface ServerQuirks {
  /** Answers a streaming request with one JSON completion (it ignores `stream: true`). */
  answersWhole?: boolean;
  /** 400 to a request carrying `stream_options`, in Azure's words. */
  refusesStreamOptions?: boolean;
  /** 500 to a streaming request that offers tools, in llama.cpp's words. */
  noToolsWhenStreaming?: boolean;
  /** A 200 stream that holds nothing but `[DONE]` (a proxy that lost the answer). */
  emptyStream?: boolean;
}

export class ScriptedModelServer {
  readonly requests: RecordedRequest[] = [];
  /** Set to behave as a server that differs in these ways (each refusal takes no scripted reply). */
  quirks: ServerQuirks = {};
  #rules: LiveRule[] = [];
  #unmatched: RecordedRequest[] = [];
  #server: Server;
  #sockets = new Set<import("node:net").Socket>();
  #counter = 0;

  private constructor() {
    this.#server = createServer((req, res) => void this.#handle(req, res));
    this.#server.on("connection", (socket) => {
      this.#sockets.add(socket);
      socket.once("close", () => this.#sockets.delete(socket));
    });
  }

  /** Listens on loopback, or on `options.host` (an address other hosts reach it at). */
  static async start(
    rules: ScriptRule[] = [],
    options: { host?: string } = {},
  ): Promise<ScriptedModelServer> {
    const server = new ScriptedModelServer();
    server.script(...rules);
    const host = options.host ?? "127.0.0.1";
    await new Promise<void>((resolve) => server.#server.listen(0, host, resolve));
    return server;
  }

  /** The base URL to give the SDK (`…/v1`), at the address it listens on. */
  get baseURL(): string {
    const { address, port } = this.#server.address() as AddressInfo;
    return `http://${address.includes(":") ? `[${address}]` : address}:${port}/v1`;
  }

  /** Adds rules; earlier rules win when several match. */
  script(...rules: ScriptRule[]): this {
    for (const rule of rules) this.#rules.push({ ...rule, remaining: rule.times ?? 1 });
    return this;
  }

  /** Throws when a finite rule was not used up, or a request found no rule. */
  assertComplete(): void {
    const left = this.#rules.filter((rule) => Number.isFinite(rule.remaining) && rule.remaining > 0);
    const problems: string[] = [];
    if (left.length > 0)
      problems.push(
        `${left.length} scripted repl${left.length === 1 ? "y was" : "ies were"} never requested`,
      );
    if (this.#unmatched.length > 0) {
      const last = this.#unmatched.at(-1)?.body.messages.at(-1);
      problems.push(
        `${this.#unmatched.length} request(s) matched no rule (last message: ${JSON.stringify(last)?.slice(0, 200)})`,
      );
    }
    if (problems.length > 0) throw new Error(`scripted model: ${problems.join("; ")}`);
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
      return sendJson(res, 404, {
        error: { message: `no route ${req.method} ${req.url}`, type: "not_found" },
      });
    }
    let body: ChatRequest;
    try {
      body = JSON.parse(await readBody(req)) as ChatRequest;
    } catch {
      return sendJson(res, 400, { error: { message: "body is not JSON", type: "invalid_request_error" } });
    }
    const index = this.#rules.findIndex((rule) => rule.remaining > 0 && matches(rule.match, body));
    const recorded: RecordedRequest = { body, headers: req.headers, rule: index, receivedAt: Date.now() };
    const started = performance.now();
    res.once("finish", () => {
      recorded.servedMs = performance.now() - started;
    });
    this.requests.push(recorded);
    if (this.quirks.refusesStreamOptions && body.stream_options !== undefined)
      return sendJson(res, 400, {
        error: {
          message: "Unrecognized request argument supplied: stream_options",
          type: "invalid_request_error",
        },
      });
    if (this.quirks.noToolsWhenStreaming && body.stream && (body.tools?.length ?? 0) > 0)
      return sendJson(res, 500, { error: { message: "Cannot use tools with stream", type: "server_error" } });
    if (this.quirks.emptyStream && body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end("data: [DONE]\n\n");
    }
    const rule = this.#rules[index];
    if (!rule) {
      this.#unmatched.push(recorded);
      return sendJson(res, 500, {
        error: { message: "scripted model: no reply scripted for this request", type: "server_error" },
      });
    }
    rule.remaining--;
    const reply = typeof rule.reply === "function" ? rule.reply(body) : rule.reply;
    if (reply.delayMs) await sleep(reply.delayMs);
    if ("error" in reply) {
      const headers: Record<string, string> = {};
      if (reply.error.retryAfter !== undefined) headers["retry-after"] = reply.error.retryAfter;
      return sendJson(
        res,
        reply.error.status,
        {
          error: {
            message: reply.error.message ?? `scripted error ${reply.error.status}`,
            type: "scripted",
            code: reply.error.code ?? null,
          },
        },
        headers,
      );
    }
    if ("raw" in reply) return this.#replay(res, reply, reply.chunkDelayMs);
    const id = `chatcmpl-${++this.#counter}`;
    const parts = replyParts(reply, body, String(this.#counter));
    if (!body.stream || this.quirks.answersWhole)
      return sendJson(res, 200, wholeCompletion(reply, parts, id, body.model));

    res.writeHead(200, {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    const base = {
      id,
      object: "chat.completion.chunk",
      created: Math.floor(Date.now() / 1000),
      model: body.model,
    };
    // Each chunk is flushed before the next step, so a scripted drop cuts exactly where it says.
    const send = (payload: unknown) =>
      new Promise<void>((resolve) => res.write(`data: ${JSON.stringify(payload)}\n\n`, () => resolve()));
    let sent = 0;
    for (const delta of [{ role: "assistant", content: "" }, ...streamDeltas(reply, parts)] as Delta[]) {
      if (reply.dropAfterChunks !== undefined && sent >= reply.dropAfterChunks) {
        res.socket?.destroy();
        return;
      }
      if (res.destroyed) return;
      await send({ ...base, choices: [{ index: 0, delta, finish_reason: null }] });
      sent++;
      if (reply.chunkDelayMs) await sleep(reply.chunkDelayMs);
    }
    if (!reply.omitFinishReason)
      await send({ ...base, choices: [{ index: 0, delta: {}, finish_reason: parts.finishReason }] });
    if (!reply.omitUsage && body.stream_options?.include_usage)
      await send({ ...base, choices: [], usage: parts.usage });
    res.end("data: [DONE]\n\n");
  }

  /** A raw reply as it is: an SSE body an event at a time, anything else in one piece. */
  async #replay(res: ServerResponse, reply: RawReply, gapMs: number | undefined): Promise<void> {
    const contentType = reply.contentType ?? "text/event-stream";
    res.writeHead(reply.status ?? 200, { "content-type": contentType, "cache-control": "no-cache" });
    if (!/event-stream/i.test(contentType)) return void res.end(reply.raw);
    for (const event of sseEvents(reply.raw)) {
      if (res.destroyed) return;
      await new Promise<void>((resolve) => res.write(event, () => resolve()));
      if (gapMs) await sleep(gapMs);
    }
    res.end();
  }
}

function matches(match: RequestMatch | undefined, body: ChatRequest): boolean {
  if (!match) return true;
  const test = (pattern: string | RegExp, value: string | undefined) =>
    value !== undefined && (typeof pattern === "string" ? value.includes(pattern) : pattern.test(value));
  if (match.system !== undefined) {
    const system = body.messages.find((m) => m.role === "system")?.content ?? undefined;
    if (!test(match.system, system)) return false;
  }
  if (match.lastUser !== undefined) {
    const user = body.messages.findLast((m) => m.role === "user")?.content ?? undefined;
    if (!test(match.lastUser, user)) return false;
  }
  if (
    match.turn !== undefined &&
    body.messages.filter((m) => m.role === "assistant").length + 1 !== match.turn
  )
    return false;
  if (match.withTools !== undefined && (body.tools?.length ?? 0) > 0 !== match.withTools) return false;
  return match.where ? match.where(body) : true;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (data += chunk));
    req.on("end", () => resolve(data));
    req.on("error", reject);
  });
}

function sendJson(
  res: ServerResponse,
  status: number,
  payload: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(payload));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
