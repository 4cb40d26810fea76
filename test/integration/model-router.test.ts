import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { troupeConfigSchema } from "../../src/config/schema.js";
import {
  CircuitOpenError,
  ContextLengthExceededError,
  ModelError,
  ModelNotConfiguredError,
  PartialOutputError,
} from "../../src/model/errors.js";
import { type ClientSettings, ModelRouter, type ModelRouterOptions } from "../../src/model/model-router.js";
import type { ChatMessage } from "../../src/model/types.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

let server: ScriptedModelServer;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
});
afterEach(async () => {
  await server.close();
});

function router(options: ModelRouterOptions = {}) {
  const config = troupeConfigSchema.parse({
    providers: {
      openai: {
        baseURL: server.baseURL,
        models: { "model-a": { contextWindow: 1000, inputPerMTok: 1, outputPerMTok: 2 }, "model-b": {} },
      },
    },
  });
  return new ModelRouter(config, { env: {}, retry: { baseDelayMs: 5, maxDelayMs: 20 }, ...options });
}

const messages: ChatMessage[] = [
  { role: "system", content: "You are a test." },
  { role: "user", content: "Hello there" },
];
const tools = [
  {
    name: "read_file",
    description: "Reads.",
    parameters: { type: "object", properties: { path: { type: "string" } } },
  },
];

describe("ModelRouter over HTTP to the scripted server", () => {
  it("streams text deltas as they arrive, with usage and cost", async () => {
    server.script({ reply: { text: "Hello, world. How are you?", chunks: 4 } });
    const deltas: string[] = [];
    const response = await router().call(["model-a"], { messages, onDelta: (t) => deltas.push(t) });
    expect(deltas.length).toBe(4);
    expect(deltas.join("")).toBe("Hello, world. How are you?");
    expect(response.message).toEqual({ role: "assistant", content: "Hello, world. How are you?" });
    expect(response.finishReason).toBe("stop");
    expect(response.usage.inputTokens).toBeGreaterThan(5);
    expect(response.usage.outputTokens).toBeGreaterThan(3);
    expect(response.usage.costUsd).toBeCloseTo(
      (response.usage.inputTokens * 1 + response.usage.outputTokens * 2) / 1e6,
      12,
    );
    const sent = server.requests[0]?.body;
    expect(sent).toMatchObject({ model: "model-a", stream: true, stream_options: { include_usage: true } });
    server.assertComplete();
  });

  it.each(["split", "whole", "no-index"] as const)(
    "assembles parallel tool calls streamed %s",
    async (style) => {
      server.script({
        reply: {
          toolCallStyle: style,
          toolCalls: [
            { name: "read_file", arguments: { path: "a.txt", note: "x".repeat(40) } },
            { name: "read_file", arguments: { path: "b.txt" } },
          ],
        },
      });
      const response = await router().call(["model-a"], { messages, tools });
      expect(response.finishReason).toBe("tool_calls");
      const calls = response.message.tool_calls ?? [];
      expect(calls.map((c) => JSON.parse(c.function.arguments).path)).toEqual(["a.txt", "b.txt"]);
      expect(calls.map((c) => c.function.name)).toEqual(["read_file", "read_file"]);
      expect(new Set(calls.map((c) => c.id)).size).toBe(2);
      expect(server.requests[0]?.body.tools?.[0]?.function.name).toBe("read_file");
    },
  );

  it("counts usage itself when the server sends none", async () => {
    server.script({ reply: { text: "no usage here", omitUsage: true } });
    const response = await router().call(["model-a"], { messages });
    expect(response.usage.inputTokens).toBeGreaterThan(5);
    expect(response.usage.outputTokens).toBe(3);
  });

  it("drops a tool call cut short by finish_reason length, and says so", async () => {
    server.script({
      reply: { toolCalls: [{ name: "read_file", arguments: '{"path": "a.t' }], finishReason: "length" },
    });
    const response = await router().call(["model-a"], { messages, tools });
    expect(response.finishReason).toBe("length");
    expect(response.truncatedToolCalls).toBe(true);
    expect(response.message.tool_calls).toBeUndefined();
  });

  it("retries 429 and 5xx, honouring Retry-After", async () => {
    server.script(
      { reply: { error: { status: 429, retryAfter: "0.3" } } },
      { reply: { error: { status: 503 } } },
      { reply: { text: "finally" } },
    );
    const response = await router().call(["model-a"], { messages });
    expect(response.message.content).toBe("finally");
    const [first, second] = server.requests;
    expect((second?.receivedAt ?? 0) - (first?.receivedAt ?? 0)).toBeGreaterThanOrEqual(290);
    server.assertComplete();
  });

  it("takes a stream that ends with [DONE] and no finish_reason as a whole answer, ended as its parts say", async () => {
    server.script(
      { reply: { text: "all of it", omitFinishReason: true } },
      { reply: { toolCalls: [{ name: "read_file", arguments: { path: "a" } }], omitFinishReason: true } },
    );
    const text = await router().call(["model-a"], { messages });
    expect(text).toMatchObject({ message: { content: "all of it" }, finishReason: "stop" });
    const calls = await router().call(["model-a"], { messages });
    expect(calls.finishReason).toBe("tool_calls");
    expect(calls.message.tool_calls?.map((call) => call.function.name)).toEqual(["read_file"]);
    expect(server.requests).toHaveLength(2);
  });

  it("takes a whole JSON completion sent for a streaming request, and asks that provider without streaming after", async () => {
    server.quirks = { answersWhole: true };
    server.script(
      { reply: { text: "whole answer", toolCalls: [{ name: "read_file", arguments: { path: "a" } }] } },
      { reply: { text: "second" } },
    );
    const deltas: string[] = [];
    const r = router();
    const first = await r.call(["model-a"], { messages, tools, onDelta: (t) => deltas.push(t) });
    expect(first).toMatchObject({ message: { content: "whole answer" }, finishReason: "tool_calls" });
    expect(first.message.tool_calls?.[0]?.function).toEqual({ name: "read_file", arguments: '{"path":"a"}' });
    expect(deltas).toEqual(["whole answer"]);
    expect(first.usage.inputTokens).toBeGreaterThan(0);
    expect((await r.call(["model-a"], { messages })).message.content).toBe("second");
    expect(server.requests.map((q) => q.body.stream)).toEqual([true, false]);
  });

  it("keeps apart the calls of a whole completion that carry no ids", async () => {
    server.quirks = { answersWhole: true };
    server.script({
      reply: {
        toolCalls: [
          { name: "read_file", arguments: { path: "a" }, id: "" },
          { name: "read_file", arguments: { path: "b" }, id: "" },
        ],
      },
    });
    const response = await router().call(["model-a"], { messages, tools });
    expect(response.message.tool_calls?.map((call) => call.function.arguments)).toEqual([
      '{"path":"a"}',
      '{"path":"b"}',
    ]);
  });

  it("asks without stream_options once a server refuses them, and streams without tools when it cannot with them", async () => {
    server.quirks = { refusesStreamOptions: true };
    server.script({ reply: { text: "no usage asked" } }, { reply: { text: "still none" } });
    const r = router();
    expect((await r.call(["model-a"], { messages })).message.content).toBe("no usage asked");
    expect((await r.call(["model-a"], { messages })).message.content).toBe("still none");
    expect(server.requests.map((q) => q.body.stream_options !== undefined)).toEqual([true, false, false]);

    server.quirks = { noToolsWhenStreaming: true };
    server.script({ reply: { toolCalls: [{ name: "read_file", arguments: { path: "b" } }] } });
    const withTools = await r.call(["model-a"], { messages, tools });
    expect(withTools.message.tool_calls?.[0]?.function.name).toBe("read_file");
    expect(server.requests.slice(3).map((q) => q.body.stream)).toEqual([true, false]);
  });

  it("asks a provider set to stream: false for whole completions, and fails a stream that holds nothing rather than answer empty", async () => {
    const config = troupeConfigSchema.parse({
      providers: { openai: { baseURL: server.baseURL, stream: false, streamUsage: false } },
    });
    server.script({ reply: { text: "whole" } });
    const r = new ModelRouter(config, { env: {}, retry: { baseDelayMs: 5, maxDelayMs: 20, maxRetries: 0 } });
    expect((await r.call(["gpt-4o-mini"], { messages })).message.content).toBe("whole");
    expect(server.requests[0]?.body.stream).toBe(false);

    server.quirks = { emptyStream: true };
    const failure = await router({ retry: { baseDelayMs: 5, maxDelayMs: 20, maxRetries: 1 } })
      .call(["model-a"], { messages })
      .catch((error: Error) => error);
    expect(failure).toBeInstanceOf(ModelError);
    expect((failure as Error).message).toContain("the server's stream held no answer");
    expect(server.requests).toHaveLength(3);
  });

  it("retries a connection dropped before any output", async () => {
    server.script({ reply: { text: "lost", dropAfterChunks: 0 } }, { reply: { text: "second try" } });
    const response = await router().call(["model-a"], { messages });
    expect(response.message.content).toBe("second try");
  });

  it("never retries once output reached the user", async () => {
    server.script(
      { reply: { text: "partial answer that breaks", chunks: 5, dropAfterChunks: 3 } },
      { reply: { text: "x" } },
    );
    const deltas: string[] = [];
    const failure = await router()
      .call(["model-a"], { messages, onDelta: (t) => deltas.push(t) })
      .catch((e) => e);
    expect(failure).toBeInstanceOf(PartialOutputError);
    expect(deltas.length).toBeGreaterThan(0);
    expect(server.requests).toHaveLength(1);
  });

  it("never retries once the answer has begun, though only reasoning or a tool call's fragments came", async () => {
    server.script(
      { reply: { reasoning: "Thinking it over", chunks: 3, dropAfterChunks: 2 } },
      { reply: { toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }], dropAfterChunks: 3 } },
      { reply: { text: "the script moved on" }, times: 2 },
    );
    const thoughts: string[] = [];
    const cutThinking = await router()
      .call(["model-a"], { messages, onReasoning: (t) => thoughts.push(t) })
      .catch((e) => e);
    expect(cutThinking).toBeInstanceOf(PartialOutputError);
    expect(cutThinking.message).toContain("the stream broke after the answer had begun");
    expect(thoughts.join("")).toBe("Thinki");
    const cutCall = await router()
      .call(["model-a"], { messages, tools })
      .catch((e) => e);
    expect(cutCall).toBeInstanceOf(PartialOutputError);
    expect(server.requests).toHaveLength(2);
  });

  it("gives reasoning to onReasoning as it streams and keeps it out of the message, streamed or whole", async () => {
    server.script(
      { reply: { reasoning: "Let me think.", text: "Answer.", chunks: 2 } },
      { reply: { reasoning: "Thought whole.", reasoningField: "reasoning", text: "Whole." } },
    );
    const thoughts: string[] = [];
    const deltas: string[] = [];
    const streamed = await router().call(["model-a"], {
      messages,
      onReasoning: (t) => thoughts.push(t),
      onDelta: (t) => deltas.push(t),
    });
    expect(thoughts).toEqual(["Let me ", "think."]);
    expect(deltas.join("")).toBe("Answer.");
    expect(streamed.reasoning).toBe("Let me think.");
    expect(streamed.message).toEqual({ role: "assistant", content: "Answer." });

    server.quirks = { answersWhole: true };
    thoughts.length = 0;
    const whole = await router().call(["model-a"], { messages, onReasoning: (t) => thoughts.push(t) });
    expect(thoughts).toEqual(["Thought whole."]);
    expect(whole.reasoning).toBe("Thought whole.");
    expect(whole.message).toEqual({ role: "assistant", content: "Whole." });
  });

  it("does not retry a client error", async () => {
    server.script({ reply: { error: { status: 401, message: "bad key" } } });
    const failure = await router()
      .call(["model-a"], { messages })
      .catch((e) => e);
    expect(failure).toBeInstanceOf(ModelError);
    expect(failure.status).toBe(401);
    expect(server.requests).toHaveLength(1);
  });

  it("reports context length exceeded without retrying or falling back", async () => {
    server.script({
      reply: {
        error: {
          status: 400,
          code: "context_length_exceeded",
          message: "This model's maximum context length is 1000 tokens",
        },
      },
    });
    const failure = await router()
      .call(["model-a", "model-b"], { messages })
      .catch((e) => e);
    expect(failure).toBeInstanceOf(ContextLengthExceededError);
    expect(server.requests).toHaveLength(1);
  });

  it("falls back down the chain when a model keeps failing", async () => {
    server.script(
      { match: { where: (r) => r.model === "model-a" }, reply: { error: { status: 500 } }, times: 2 },
      { match: { where: (r) => r.model === "model-b" }, reply: { text: "from b" } },
    );
    const response = await router({ retry: { maxRetries: 1, baseDelayMs: 1 } }).call(["model-a", "model-b"], {
      messages,
    });
    expect(response.model).toBe("model-b");
    expect(response.message.content).toBe("from b");
    server.assertComplete();
  });

  it("opens a model's circuit after repeated failures, then probes after the cool-down", async () => {
    let now = 0;
    const r = router({
      retry: { maxRetries: 0 },
      circuit: { failureThreshold: 2, coolDownMs: 1000, now: () => now },
    });
    server.script({
      match: { where: (q) => q.model === "model-a" },
      reply: { error: { status: 500 } },
      times: 2,
    });
    server.script({
      match: { where: (q) => q.model === "model-b" },
      reply: { text: "b" },
      times: Number.POSITIVE_INFINITY,
    });
    await r.call(["model-a", "model-b"], { messages });
    await r.call(["model-a", "model-b"], { messages });
    expect(r.breaker("model-a").state).toBe("open");
    const before = server.requests.length;
    await r.call(["model-a", "model-b"], { messages });
    expect(server.requests.slice(before).map((q) => q.body.model)).toEqual(["model-b"]);
    await expect(r.call(["model-a"], { messages })).rejects.toBeInstanceOf(CircuitOpenError);

    now = 1500;
    expect(r.breaker("model-a").state).toBe("half-open");
    server.script({ match: { where: (q) => q.model === "model-a" }, reply: { text: "a is back" } });
    const probe = await r.call(["model-a", "model-b"], { messages });
    expect(probe.model).toBe("model-a");
    expect(r.breaker("model-a").state).toBe("closed");
  });

  it("aborts a slow stream promptly through the signal", async () => {
    server.script({ reply: { text: "slow ".repeat(50), chunks: 50, chunkDelayMs: 50 } });
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(), 150);
    await expect(router().call(["model-a"], { messages, signal: controller.signal })).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("says in one line what to set when there is no key and no server", () => {
    const r = new ModelRouter(troupeConfigSchema.parse({}), { env: {} });
    expect(() => r.assertConfigured("gpt-4o-mini")).toThrow(ModelNotConfiguredError);
    expect(() => r.assertConfigured("gpt-4o-mini")).toThrow(
      /set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL/,
    );
    const withKey = new ModelRouter(troupeConfigSchema.parse({}), { env: { OPENAI_API_KEY: "sk-test" } });
    expect(() => withKey.assertConfigured("gpt-4o-mini")).not.toThrow();
  });

  it("resolves provider/model names and context windows from the config", () => {
    const config = troupeConfigSchema.parse({
      providers: {
        openai: { models: { "gpt-4o": { contextWindow: 128000 } } },
        local: {
          baseURL: "http://127.0.0.1:1/v1",
          contextWindow: 8192,
          models: { "llama3.1": { contextWindow: 32768 } },
        },
      },
    });
    const r = new ModelRouter(config, { env: {} });
    expect(r.resolve("gpt-4o")).toMatchObject({ provider: "openai", name: "gpt-4o", contextWindow: 128000 });
    expect(r.resolve("llama3.1")).toMatchObject({
      provider: "local",
      name: "llama3.1",
      contextWindow: 32768,
    });
    expect(r.resolve("local/qwen")).toMatchObject({ provider: "local", name: "qwen", contextWindow: 8192 });
    expect(r.resolve("meta-llama/Llama-3-8B")).toMatchObject({
      provider: "openai",
      name: "meta-llama/Llama-3-8B",
    });
  });
});

describe("a client of the caller's making", () => {
  it("runs an agent with no HTTP server: the router's client factory gets the provider's settings, and the SDK's fetch answers in-process", async () => {
    const seen: Array<{ url: string; body: { model: string; stream?: boolean } }> = [];
    const fetch = async (url: string | URL | Request, init?: RequestInit) => {
      seen.push({ url: String(url), body: JSON.parse(String(init?.body)) });
      const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      const body = `${chunk({ role: "assistant", content: "In-process " })}${chunk({ content: "answer." }, "stop")}data: [DONE]\n\n`;
      return new Response(body, { headers: { "content-type": "text/event-stream" } });
    };
    const settings: ClientSettings[] = [];
    const config = testConfig(
      {
        defaultModel: "local-model",
        providers: { openai: { baseURL: "http://nowhere.invalid/v1", models: { "local-model": {} } } },
      },
      [{ name: "a", description: "A.", tools: [] }],
    );
    const { dir: workspace, dispose } = tempTree({});
    const rt = await new Runtime({
      config,
      workspace,
      env: {},
      models: {
        client: (given) => {
          settings.push(given);
          return new OpenAI({ ...given, fetch });
        },
      },
    }).open();
    const output = await rt.start({ task: "Hello" }).done;
    await rt.close();
    dispose();
    expect(output).toMatchObject({ reason: "done", result: "In-process answer." });
    expect(settings).toEqual([
      { apiKey: "not-needed", baseURL: "http://nowhere.invalid/v1", maxRetries: 0, timeout: 600_000 },
    ]);
    expect(seen).toEqual([
      {
        url: "http://nowhere.invalid/v1/chat/completions",
        body: expect.objectContaining({ model: "local-model", stream: true }),
      },
    ]);
  });
});
