import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";

let server: ScriptedModelServer;
let client: OpenAI;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  client = new OpenAI({ baseURL: server.baseURL, apiKey: "test", maxRetries: 0 });
});
afterEach(async () => {
  await server.close();
});

const ask = (system: string, user = "go") =>
  client.chat.completions.create({
    model: "m",
    messages: [
      { role: "system", content: system },
      { role: "user", content: user },
    ],
  });

describe("the scripted model server", () => {
  it("answers plain JSON completions with text, tool calls and usage", async () => {
    server.script({ reply: { text: "hi", toolCalls: [{ name: "grep", arguments: { q: "x" }, id: "c1" }] } });
    const completion = await ask("s");
    expect(completion.choices[0]?.message).toMatchObject({
      role: "assistant",
      content: "hi",
      tool_calls: [{ id: "c1", type: "function", function: { name: "grep", arguments: '{"q":"x"}' } }],
    });
    expect(completion.choices[0]?.finish_reason).toBe("tool_calls");
    expect(completion.usage?.total_tokens).toBeGreaterThan(0);
  });

  it("chooses replies by rule, so concurrent agents get their own answers", async () => {
    server.script(
      { match: { system: "agent A" }, reply: { text: "for A", delayMs: 50 }, times: 3 },
      { match: { system: "agent B" }, reply: { text: "for B" }, times: 3 },
    );
    const answers = await Promise.all([
      ask("agent A"),
      ask("agent B"),
      ask("agent A"),
      ask("agent B"),
      ask("agent A"),
      ask("agent B"),
    ]);
    expect(answers.map((a) => a.choices[0]?.message.content)).toEqual([
      "for A",
      "for B",
      "for A",
      "for B",
      "for A",
      "for B",
    ]);
    server.assertComplete();
    expect(server.requests).toHaveLength(6);
  });

  it("fails assertComplete when a scripted reply was never asked for", async () => {
    server.script({ reply: { text: "one" } }, { reply: { text: "two" } });
    await ask("s");
    expect(() => server.assertComplete()).toThrow("scripted model: 1 scripted reply was never requested");
  });

  it("fails assertComplete when a request matched no rule, and answers it with a 500", async () => {
    server.script({ match: { lastUser: "hello" }, reply: { text: "hi" } });
    await expect(ask("s", "something else")).rejects.toMatchObject({ status: 500 });
    await ask("s", "hello");
    expect(() => server.assertComplete()).toThrow(/1 request\(s\) matched no rule/);
  });

  it("sends scripted errors with their status and Retry-After", async () => {
    server.script({ reply: { error: { status: 429, retryAfter: "7", message: "slow down" } } });
    const failure = await ask("s").catch((e) => e);
    expect(failure.status).toBe(429);
    expect(failure.headers.get("retry-after")).toBe("7");
    expect(failure.message).toContain("slow down");
  });

  it("streams reasoning before the text in the field asked for, and puts it in a whole completion's message", async () => {
    server.script(
      { reply: { reasoning: "Think first.", text: "Then answer.", chunks: 2 } },
      { reply: { reasoning: "Ollama thinks here.", text: "ok", reasoningField: "reasoning" } },
    );
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "go" }],
      stream: true,
    });
    const deltas: Array<Record<string, unknown>> = [];
    for await (const chunk of stream) if (chunk.choices[0]) deltas.push({ ...chunk.choices[0].delta });
    const said = (field: string) =>
      deltas
        .map((d) => d[field])
        .filter(Boolean)
        .join("");
    expect(said("reasoning_content")).toBe("Think first.");
    expect(said("content")).toBe("Then answer.");
    expect(deltas.findIndex((d) => d.content)).toBeGreaterThan(deltas.findIndex((d) => d.reasoning_content));

    const whole = await ask("s");
    expect(whole.choices[0]?.message).toMatchObject({ content: "ok", reasoning: "Ollama thinks here." });
  });

  it("replays a raw reply byte for byte, an SSE body an event at a time, whatever the request asked", async () => {
    const raw = `: keep-alive\n\ndata: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"raw"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n`;
    server.script(
      { reply: { raw } },
      { reply: { raw: '{"not":"a completion"}', contentType: "application/json", status: 502 } },
    );
    const response = await fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [], stream: false }),
    });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    expect(await response.text()).toBe(raw);
    const json = await fetch(`${server.baseURL}/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: "m", messages: [] }),
    });
    expect(json.status).toBe(502);
    expect(await json.text()).toBe('{"not":"a completion"}');
    server.assertComplete();
  });
});
