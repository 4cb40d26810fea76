import { readdirSync, readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { troupeConfigSchema } from "../../src/config/schema.js";
import { ModelRouter } from "../../src/model/model-router.js";
import type { ChatMessage } from "../../src/model/types.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { DIR, fixtures } from "../support/wire-fixtures.js";

/*
 * The conformance suite: each recorded-shape body of test/fixtures/wire (one per kind of server)
 * replayed verbatim over HTTP to the real openai SDK through the model router, and what it assembled
 * checked against the fixture's expect file.
 */

let server: ScriptedModelServer;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
});
afterEach(async () => {
  await server.close();
});

const messages: ChatMessage[] = [
  { role: "system", content: "You read files." },
  { role: "user", content: "What does a.txt say?" },
];
const tools = ["read_file", "list_dir", "write_file"].map((name) => ({
  name,
  description: `${name}.`,
  parameters: { type: "object", properties: { path: { type: "string" } } },
}));

describe("wire conformance: each server's documented shape, through the openai SDK over HTTP", () => {
  it("has a fixture for every kind of server the issue names, and no body without its expect file", () => {
    const names = fixtures.map((f) => f.name);
    for (const kind of [
      "openai-usage-last",
      "ollama",
      "vllm-reasoning",
      "gemini-no-index",
      "azure-empty-first",
      "openrouter-comments",
      "llamacpp",
      "no-ids",
      "done-without-finish",
      "json-answer",
      "index-collision",
      "object-arguments",
      "repeated-name",
      "split-name",
      "legacy-function-call",
      "vllm-stream-error",
      "openai-refusal-streamed",
      "openai-refusal-whole",
    ])
      expect(names).toContain(kind);
    const bodies = readdirSync(DIR).filter((f) => /\.(sse|json)$/.test(f) && !f.endsWith(".expect.json"));
    expect(bodies.map((f) => f.replace(/\.(sse|json)$/, "")).sort()).toEqual(names);
  });

  it.each(fixtures)("$name: $shows", async (fixture) => {
    server.script({ reply: { raw: fixture.body, contentType: fixture.contentType } });
    const config = troupeConfigSchema.parse({ providers: { openai: { baseURL: server.baseURL } } });
    const router = new ModelRouter(config, { env: {}, retry: { maxRetries: 0 } });
    const deltas: string[] = [];
    const thoughts: string[] = [];
    const answer = await router
      .call(["scripted"], {
        messages,
        tools,
        onDelta: (text) => deltas.push(text),
        onReasoning: (text) => thoughts.push(text),
      })
      .catch((error: Error) => error);
    server.assertComplete();

    if (fixture.error) {
      expect(answer).toBeInstanceOf(Error);
      expect((answer as Error).name).toBe(fixture.error.name);
      expect((answer as Error).message).toContain(fixture.error.message);
      return;
    }
    if (answer instanceof Error) throw answer;
    const want = fixture.expect as NonNullable<typeof fixture.expect>;
    expect(answer.message.content).toBe(want.text);
    expect(deltas.join("")).toBe(want.text ?? "");
    expect(answer.reasoning).toBe(want.reasoning);
    expect(thoughts.join("")).toBe(want.reasoning ?? "");
    expect(answer.message.refusal).toBe(want.refusal);
    expect(Object.keys(answer.message).sort()).toEqual(
      [
        "content",
        ...(want.refusal === undefined ? [] : ["refusal"]),
        "role",
        ...(want.toolCalls.length > 0 ? ["tool_calls"] : []),
      ].sort(),
    );

    const calls = answer.message.tool_calls ?? [];
    expect(
      calls.map((c) => ({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })),
    ).toEqual(want.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments })));
    want.toolCalls.forEach((c, i) => {
      if (c.id !== undefined) expect(calls[i]?.id).toBe(c.id);
    });
    const ids = calls.map((c) => c.id);
    expect(ids.every((id) => id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);

    expect(answer.finishReason).toBe(want.finishReason);
    expect(answer.truncatedToolCalls).toBe(want.truncatedToolCalls ?? false);
    if (want.usage === "counted") {
      expect(answer.usage.inputTokens).toBeGreaterThan(0);
      expect(answer.usage.outputTokens).toBeGreaterThan(0);
    } else {
      expect(answer.usage).toMatchObject(want.usage);
    }
  });
});

describe("what goes back to the server", () => {
  it("a turn whose only call the length limit cut off goes back as a valid assistant message", async () => {
    const body = readFileSync(`${DIR}length-cut-call.sse`, "utf8");
    server.script(
      { reply: { raw: body, contentType: "text/event-stream" } },
      { match: { turn: 2 }, reply: { text: "Done." } },
    );
    const config = troupeConfigSchema.parse({ providers: { openai: { baseURL: server.baseURL } } });
    const router = new ModelRouter(config, { env: {}, retry: { maxRetries: 0 } });
    const cut = await router.call(["scripted"], { messages, tools });
    expect(cut.truncatedToolCalls).toBe(true);
    const history: ChatMessage[] = [
      ...messages,
      cut.message,
      { role: "user", content: "Your call was cut off: make it again, shorter." },
    ];
    await router.call(["scripted"], { messages: history, tools });
    server.assertComplete();

    // Chat Completions needs an assistant message's content unless it carries tool_calls.
    const sent = server.requests[1]?.body.messages[2] as Record<string, unknown>;
    expect(sent.role).toBe("assistant");
    expect(sent).not.toHaveProperty("tool_calls");
    expect(typeof sent.content).toBe("string");
    expect((sent.content as string).length).toBeGreaterThan(0);
  });
});

describe("a refusal sent back", () => {
  it("goes back as the turn's text, with no refusal key a server may not know", async () => {
    const body = readFileSync(`${DIR}openai-refusal-streamed.sse`, "utf8");
    server.script(
      { reply: { raw: body, contentType: "text/event-stream" } },
      { match: { turn: 2 }, reply: { text: "Fine." } },
    );
    const config = troupeConfigSchema.parse({ providers: { openai: { baseURL: server.baseURL } } });
    const router = new ModelRouter(config, { env: {}, retry: { maxRetries: 0 } });
    const refused = await router.call(["scripted"], { messages, tools });
    const history: ChatMessage[] = [
      ...messages,
      refused.message,
      { role: "user", content: "Then say fine." },
    ];
    await router.call(["scripted"], { messages: history, tools });
    server.assertComplete();
    expect(server.requests[1]?.body.messages[2]).toEqual({
      role: "assistant",
      content: "I'm sorry, I can't help with that.",
    });
  });
});

describe("failures: asked again only when another try could succeed, each told in one line", () => {
  const failing = (retries: number) =>
    new ModelRouter(troupeConfigSchema.parse({ providers: { openai: { baseURL: server.baseURL } } }), {
      env: {},
      retry: { maxRetries: retries, baseDelayMs: 1, maxDelayMs: 1 },
    });

  it("a 400-class error event inside a 200 stream is not asked again", async () => {
    const body = readFileSync(`${DIR}vllm-stream-error.sse`, "utf8");
    server.script({ reply: { raw: body, contentType: "text/event-stream" } });
    const retries: string[] = [];
    const failure = await failing(3)
      .call(["scripted"], { messages, tools, onRetry: (retry) => retries.push(retry.error) })
      .catch((error: Error) => error);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toContain("400 from");
    expect((failure as Error).message).toContain("Conversation roles must alternate");
    expect(retries).toEqual([]);
    expect(server.requests).toHaveLength(1);
    server.assertComplete();
  });

  it("a 503 whose body is an HTML page is retried, each notice and the failure one line of its text", async () => {
    const page = readFileSync(`${DIR}nginx-503.body`, "utf8");
    server.script({ reply: { raw: page, status: 503, contentType: "text/html" }, times: 3 });
    const retries: string[] = [];
    const failure = await failing(2)
      .call(["scripted"], { messages, tools, onRetry: (retry) => retries.push(retry.error) })
      .catch((error: Error) => error);
    server.assertComplete();
    expect(failure).toBeInstanceOf(Error);
    const said = [...retries, (failure as Error).message];
    expect(said).toHaveLength(3);
    for (const line of said) {
      expect(line).toBe(
        `503 from ${server.baseURL} (provider openai, model scripted): 503 Service Temporarily Unavailable nginx/1.27.3`,
      );
    }
  });
});
