import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { Envelope } from "../../src/events/envelope.js";
import type { AgentOutput } from "../../src/machines/agent-types.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect } from "../support/wait.js";
import { fixtures } from "../support/wire-fixtures.js";

/*
 * The conformance suite walked whole, as a run sees it: each server's body is an agent's first
 * answer (through the real openai SDK over HTTP, retried as a real server's would be), and whatever
 * that answer held must show in how the run ends. A run may end "done" only when nothing was lost:
 * its calls made under the names the server gave, or its text the answer; a refusal, an error, or an
 * answer cut off with nothing to do never end "done".
 */

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "a.txt": "alpha\n", "b.txt": "beta\n" }));
});
afterEach(async () => {
  await model.close();
  dispose();
});

const AFTER_CALLS = "I read what the calls gave.";

async function runOn(fixture: (typeof fixtures)[number]) {
  model.script(
    {
      match: { turn: 1 },
      reply: { raw: fixture.body, contentType: fixture.contentType },
      times: Number.POSITIVE_INFINITY,
    },
    { match: { turn: 2 }, reply: { text: AFTER_CALLS }, times: Number.POSITIVE_INFINITY },
  );
  const config = testConfig(
    {
      defaultModel: "scripted",
      approval: { policy: "yolo" },
      providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
    },
    [{ name: "reader", description: "Reads.", tools: ["read_file", "list_dir", "write_file"] }],
  );
  const rt = await new Runtime({
    config,
    workspace: ws,
    env: {},
    models: { retry: { baseDelayMs: 1, maxDelayMs: 5 } },
  }).open();
  try {
    const handle = rt.start({ task: "What does a.txt say?", agent: "reader" });
    const output = await handle.done;
    const events = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
    return { output, events };
  } finally {
    await rt.close();
  }
}

/** What of the server's answer a run that ended as `output` lost; empty when it ended "done" with all of it. */
function lost(fixture: (typeof fixtures)[number], output: AgentOutput, events: Envelope[]): string[] {
  if (output.reason !== "done") return [];
  const want = fixture.expect;
  if (!want) return [`the server's error (${fixture.error?.name}) ended "done"`];
  if (want.refusal !== undefined) return ['a refusal ended "done"'];
  const requested = events
    .filter((e) => e.type === "tool.requested")
    .map((e) => e.data as { name: string; error?: string });
  if (want.toolCalls.length > 0) {
    const problems: string[] = [];
    const names = requested.map((call) => call.name);
    const expected = want.toolCalls.map((call) => call.name);
    if (JSON.stringify(names) !== JSON.stringify(expected))
      problems.push(`calls ${JSON.stringify(expected)} were made as ${JSON.stringify(names)}`);
    for (const call of requested)
      if (call.error?.includes("unknown tool")) problems.push(`${call.name}: ${call.error}`);
    if (output.result !== AFTER_CALLS)
      problems.push(`the answer after the calls is ${JSON.stringify(output.result)}`);
    return problems;
  }
  if (requested.length > 0)
    return [`calls nobody sent were made: ${requested.map((c) => c.name).join(", ")}`];
  // A call the length limit cut off is not run: the model is told, and answers in a turn of its own.
  if (want.truncatedToolCalls)
    return output.turns >= 2 && output.result === AFTER_CALLS
      ? []
      : [`a call cut off ended "done" in ${output.turns} turn(s) with ${JSON.stringify(output.result)}`];
  if (!want.text) return [`an answer with no text and no call ended "done" (finish ${want.finishReason})`];
  return output.result.includes(want.text) ? [] : [`the text ${JSON.stringify(want.text)} is not the answer`];
}

describe("the conformance suite walked as runs", () => {
  it.each(fixtures)("$name: ends done only with nothing lost", async (fixture) => {
    const { output, events } = await runOn(fixture);
    expect(lost(fixture, output, events), `ended ${output.reason}: ${output.error ?? output.result}`).toEqual(
      [],
    );
    // What did not end "done" says why, in a stop reason of its own.
    if (output.reason !== "done") expect(output.reason).toMatch(/^(refused|failed)$/);
  });

  it("would catch an answer lost on the way: a stream whose call is dropped, ending done with no text", () => {
    const repeated = fixtures.find((f) => f.name === "repeated-name");
    if (!repeated?.expect) throw new Error("the suite has no repeated-name fixture");
    const done: AgentOutput = {
      reason: "done",
      result: "",
      usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 },
      turns: 1,
      toolCalls: 0,
      total: { usage: { inputTokens: 1, outputTokens: 1, cachedInputTokens: 0, costUsd: 0 }, toolCalls: 0 },
    };
    const glued = [
      { type: "tool.requested", data: { name: "write_filewrite_file", error: 'unknown tool "x"' } },
    ];
    expect(lost(repeated, done, glued as Envelope[]).length).toBeGreaterThan(0);
    expect(lost(repeated, done, []).length).toBeGreaterThan(0);
  });
});
