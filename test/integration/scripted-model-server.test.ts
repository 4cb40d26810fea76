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
});
