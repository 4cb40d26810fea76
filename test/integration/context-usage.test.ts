import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import { SUMMARIZER_PROMPT } from "../../src/actors/summarizer.js";
import { ContextLevels } from "../../src/context/context-levels.js";
import type { AgentEventMap } from "../../src/events/agent-events.js";
import type { Envelope } from "../../src/events/envelope.js";
import { countMessagesTokens, countTextTokens } from "../../src/model/tokens.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

let server: ScriptedModelServer;
let workspace: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: workspace, dispose } = tempTree({}));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const WINDOW = 4000;

/** Returns about `n` tokens of text: the test sets how fast the context fills. */
const fill = defineTool({
  name: "fill",
  description: "Returns n words.",
  effect: "read",
  parameters: z.object({ n: z.number() }),
  execute: async ({ n }) => ({ ok: true, output: "lorem ".repeat(n) }),
}) as Tool;

async function runtime() {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: {
        openai: {
          baseURL: server.baseURL,
          models: { scripted: { contextWindow: WINDOW, inputPerMTok: 1, outputPerMTok: 2 } },
        },
      },
    },
    [{ name: "worker", description: "Works.", tools: ["fill"], budget: { maxTurns: 20 } }],
  );
  return new Runtime({
    config,
    workspace,
    env: {},
    tools: [fill],
    models: { retry: { baseDelayMs: 1 } },
  }).open();
}

const fillCall = (n: number) => ({ toolCalls: [{ name: "fill", arguments: { n } }] });

describe("context use, turn by turn", () => {
  it("is reported before each model call, warned of once per crossing of 60 % and 80 %, and compaction says what it cost", async () => {
    server.script(
      { match: { system: SUMMARIZER_PROMPT.slice(0, 40) }, reply: { text: "Summary: filled." }, times: 5 },
      // Into the warning level, staying there a turn; over the threshold, pruned back down; then a
      // result too big for compaction to help: critical.
      { match: { system: '"worker"', turn: 1 }, reply: fillCall(2500) },
      { match: { system: '"worker"', turn: 2 }, reply: fillCall(20) },
      { match: { system: '"worker"', turn: 3 }, reply: fillCall(800) },
      { match: { system: '"worker"', turn: 4 }, reply: fillCall(3300) },
      { match: { system: '"worker"' }, reply: { text: "Filled." } },
    );
    const rt = await runtime();
    const handle = rt.start({ task: "Fill the context.", agent: "worker" });
    expect(await handle.done).toMatchObject({ reason: "done", result: "Filled." });
    const events: Envelope[] = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map(
      (e) => e.envelope,
    );
    const of = <T extends keyof AgentEventMap>(type: T) =>
      events.filter((e) => e.type === type).map((e) => e.data as AgentEventMap[T]);

    // One report per model call of the agent (not the summariser's), each against the model's window.
    const usage = of("context.usage");
    const requests = server.requests.filter((r) => r.body.messages[0]?.content !== SUMMARIZER_PROMPT);
    expect(usage).toHaveLength(requests.length);
    for (const [i, report] of usage.entries()) {
      expect(report.contextWindow).toBe(WINDOW);
      expect(report.percent).toBe(Math.round((report.tokens / WINDOW) * 100));
      // An estimate, but close to what the request held.
      const body = requests[i]?.body;
      const exact =
        countMessagesTokens(body?.messages ?? []) +
        (body?.tools ? countTextTokens(JSON.stringify(body.tools)) : 0);
      expect(Math.abs(report.tokens - exact)).toBeLessThan(exact * 0.3);
    }
    // Each usage event comes before its model call's first event.
    const order = events.map((e) => e.type).filter((t) => t === "context.usage" || t === "model.completed");
    expect(order).toEqual(usage.flatMap(() => ["context.usage", "model.completed"]));

    // Warned of at each rise into a level, never again while it stays there.
    const levels = new ContextLevels();
    const rises = usage.flatMap((u) => levels.next(u.percent) ?? []);
    expect(rises).toEqual(["warning", "critical"]);
    expect(of("context.warning").map((w) => w.level)).toEqual(rises);
    expect(usage.map((u) => u.percent).filter((p) => p >= 60)).toHaveLength(3);

    // The summary's model calls: their tokens and cost, from the price table.
    const compactions = of("context.compacted");
    const summarized = compactions.find((c) => c.summarized > 0);
    expect(summarized?.usage.inputTokens).toBeGreaterThan(0);
    const { inputTokens = 0, outputTokens = 0, costUsd } = summarized?.usage ?? {};
    expect(costUsd).toBeCloseTo((inputTokens * 1 + outputTokens * 2) / 1_000_000, 12);
    expect(compactions.find((c) => c.summarized === 0)?.usage).toMatchObject({ inputTokens: 0, costUsd: 0 });
    await rt.close();
  });
});
