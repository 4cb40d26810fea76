import { afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import type { AgentEventMap } from "../../src/events/agent-events.js";
import { countTextTokens } from "../../src/model/tokens.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";

let server: ScriptedModelServer;
let workspace: string;
let dispose: () => void;
beforeAll(() => {
  // The scripted server counts its replies' tokens in this process: its tokenizer loads before the clock runs.
  countTextTokens("warm up");
});
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: workspace, dispose } = tempTree({}));
});
afterEach(async () => {
  await server.close();
  dispose();
});

/** A tool that runs until its call is cut (its signal aborts). */
const slow = defineTool({
  name: "slow",
  description: "Takes its time.",
  effect: "read",
  parameters: z.object({}),
  execute: (_args, { signal }) =>
    new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("cut")))),
}) as Tool;

async function runtime(budget: Record<string, number>) {
  const config = testConfig(
    { defaultModel: "scripted", providers: { openai: { baseURL: server.baseURL } } },
    [{ name: "worker", description: "Works.", tools: ["slow"], budget }],
  );
  return new Runtime({
    config,
    workspace,
    env: {},
    tools: [slow],
    models: { retry: { baseDelayMs: 1 } },
  }).open();
}

// maxWallMs 800 has a grace of 80 ms: the run ends by about 0.9 s. The bound leaves room for a slow
// machine; the soft wall of before let the final answer run its whole length (5 s and more here).
const WALL = 800;
const BOUND = 2500;
const finalAnswer = "Here is what I found so far, in many small words. ".repeat(20);

describe("the hard wall (maxWallMs) over real HTTP", () => {
  it("cuts a slow final answer at the wall's grace: budget_exhausted, with the text it had streamed", async () => {
    server.script(
      { match: { withTools: true }, reply: { text: "never heard", delayMs: 5000 } },
      { match: { withTools: false }, reply: { text: finalAnswer, chunks: 200, chunkDelayMs: 25 } },
    );
    const rt = await runtime({ maxWallMs: WALL });
    const started = Date.now();
    const handle = rt.start({ task: "think hard", agent: "worker" });
    const output = await handle.done;
    const took = Date.now() - started;
    expect(output).toMatchObject({ reason: "budget_exhausted", limit: `maxWallMs ${WALL}` });
    expect(took).toBeLessThan(BOUND);
    // What it stopped with is what the final call had streamed: a part of the answer, never more.
    const deltas = (await collect(rt.bus.eventLog.read({ runId: handle.runId })))
      .filter((e) => e.envelope.type === "model.delta")
      .map((e) => (e.envelope.data as AgentEventMap["model.delta"]).text)
      .join("");
    expect(output.result).toBe(deltas);
    expect(finalAnswer.startsWith(output.result)).toBe(true);
    expect(output.result.length).toBeLessThan(finalAnswer.length);
    await rt.close();
  });

  it("cuts a tool call in flight at the wall, and the final answer after it at the grace", async () => {
    server.script(
      {
        match: { withTools: true },
        reply: { text: "Starting the slow part.", toolCalls: [{ name: "slow", arguments: {} }] },
      },
      { match: { withTools: false }, reply: { text: "too late", delayMs: 5000 } },
    );
    const rt = await runtime({ maxWallMs: WALL });
    const started = Date.now();
    const handle = rt.start({ task: "do the slow thing", agent: "worker" });
    const output = await handle.done;
    expect(Date.now() - started).toBeLessThan(BOUND);
    expect(output).toMatchObject({
      reason: "budget_exhausted",
      limit: `maxWallMs ${WALL}`,
      result: "Starting the slow part.",
    });
    const events = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
    expect(events.find((e) => e.type === "tool.finished")?.data).toMatchObject({ name: "slow", ok: false });
    await rt.close();
  });
});
