import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { troupeConfigSchema } from "../../src/config/schema.js";
import { MAX_REPLY_CHARS } from "../../src/limits.js";
import { ReplyTooLongError } from "../../src/model/errors.js";
import { ModelRouter } from "../../src/model/model-router.js";
import type { ChatMessage } from "../../src/model/types.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";

/*
 * What one reply may cost: its length is capped (providers.NAME.maxReplyChars), and the tokens it
 * counts are never fewer than what it streamed, whatever usage the server reports. Over HTTP to the
 * scripted server, through the openai SDK.
 */

let server: ScriptedModelServer;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
});
afterEach(async () => {
  await server.close();
});

const messages: ChatMessage[] = [{ role: "user", content: "Hello there" }];

function router(provider: Record<string, unknown> = {}) {
  const config = troupeConfigSchema.parse({
    providers: { openai: { baseURL: server.baseURL, models: { "model-a": {}, "model-b": {} }, ...provider } },
  });
  return new ModelRouter(config, { env: {}, retry: { baseDelayMs: 5, maxDelayMs: 20 } });
}

describe("a reply longer than providers.NAME.maxReplyChars", () => {
  it("is 4 Mi characters unless troupe.yaml says otherwise", () => {
    const config = troupeConfigSchema.parse({ providers: { openai: {} } });
    expect(config.providers.openai?.maxReplyChars).toBe(MAX_REPLY_CHARS);
    expect(MAX_REPLY_CHARS).toBe(4 * 1024 * 1024);
  });

  it("is stopped at the cap, nothing past it handed on, and fails the call without a retry or the next model", async () => {
    // 100 deltas of 1,000 characters of reasoning, then text: the cap falls in the reasoning.
    server.script(
      { reply: { reasoning: "r".repeat(100_000), text: "never seen", chunks: 100 } },
      { reply: { text: "the next model" }, times: 3 },
    );
    const thoughts: string[] = [];
    const deltas: string[] = [];
    const failure = await router({ maxReplyChars: 5_500 })
      .call(["model-a", "model-b"], {
        messages,
        onReasoning: (t) => thoughts.push(t),
        onDelta: (t) => deltas.push(t),
      })
      .catch((error: Error) => error);
    expect(failure).toBeInstanceOf(ReplyTooLongError);
    expect((failure as Error).message).toBe(
      `the reply from ${server.baseURL} (provider openai, model model-a) passed 5500 characters: stopped there, not asked again — providers.openai.maxReplyChars raises the cap`,
    );
    expect(thoughts.join("")).toBe("r".repeat(5_000));
    expect(deltas).toEqual([]);
    expect(server.requests).toHaveLength(1);
  });

  it("counts tool calls' arguments, and holds for a whole completion too", async () => {
    server.script(
      { reply: { toolCalls: [{ name: "read_file", arguments: { path: "a".repeat(2_000) } }] } },
      { reply: { text: "t".repeat(2_000) } },
    );
    const capped = router({ maxReplyChars: 1_000 });
    const call = await capped.call(["model-a"], { messages }).catch((error: Error) => error);
    expect(call).toBeInstanceOf(ReplyTooLongError);
    server.quirks = { answersWhole: true };
    const deltas: string[] = [];
    const whole = await capped
      .call(["model-a"], { messages, onDelta: (t) => deltas.push(t) })
      .catch((error: Error) => error);
    expect(whole).toBeInstanceOf(ReplyTooLongError);
    expect(deltas).toEqual([]);
    server.assertComplete();
  });
});

describe("the usage a server reports", () => {
  /** A stream of `text` in 1,000-character deltas whose usage says `completion_tokens`. */
  const streamed = (text: string, completionTokens: number) => {
    const chunk = (body: object) =>
      `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 1, model: "m", ...body })}\n\n`;
    const deltas = Array.from({ length: Math.ceil(text.length / 1000) }, (_, i) =>
      text.slice(i * 1000, (i + 1) * 1000),
    );
    return [
      ...deltas.map((content) => chunk({ choices: [{ index: 0, delta: { content }, finish_reason: null }] })),
      chunk({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }),
      chunk({
        choices: [],
        usage: {
          prompt_tokens: 10,
          completion_tokens: completionTokens,
          total_tokens: 10 + completionTokens,
        },
      }),
      "data: [DONE]\n\n",
    ].join("");
  };

  it("is believed when it is at least one token per 8 bytes of what streamed", async () => {
    server.script({ reply: { raw: streamed("word ".repeat(8_000), 8_000) } });
    const response = await router().call(["model-a"], { messages });
    expect(response.usage).toMatchObject({ inputTokens: 10, outputTokens: 8_000 });
  });

  it("is not believed below that: 40,000 characters are not 1 token", async () => {
    server.script({ reply: { raw: streamed("y".repeat(40_000), 1) } });
    const response = await router().call(["model-a"], { messages });
    expect(response.message.content).toHaveLength(40_000);
    expect(response.usage).toMatchObject({ inputTokens: 10, outputTokens: 5_000 });
  });
});
