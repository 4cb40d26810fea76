import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import { SUMMARIZER_PROMPT } from "../../src/actors/summarizer.js";
import type { AgentEventMap } from "../../src/events/agent-events.js";
import type { Envelope } from "../../src/events/envelope.js";
import { countMessagesTokens, countTextTokens, countToolSpecTokens } from "../../src/model/tokens.js";
import type { ToolSpec } from "../../src/model/types.js";
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
  ({ dir: workspace, dispose } = tempTree({ "notes.txt": "one\ntwo\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(
  agent: Record<string, unknown>,
  options: { contextWindow?: number; tools?: Tool[] } = {},
) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: {
        openai: {
          baseURL: server.baseURL,
          models: { scripted: { contextWindow: options.contextWindow ?? 100_000 } },
        },
      },
    },
    [{ name: "worker", description: "Works.", tools: ["read_file", "list_dir"], ...agent }],
  );
  return new Runtime({
    config,
    workspace,
    env: {},
    tools: options.tools ?? [],
    models: { retry: { baseDelayMs: 1 } },
  }).open();
}

async function eventsOf(rt: Runtime, runId: string): Promise<Envelope[]> {
  return (await collect(rt.bus.eventLog.read({ runId }))).map((e) => e.envelope);
}

describe("agent runtime on LocalBus with the scripted model over HTTP", () => {
  it("keeps going for 200 turns under a small context window, compacting, never sending a request over the window", async () => {
    const lines = Array.from({ length: 400 }, (_, i) => `line ${i}: ${"data ".repeat(8)}`).join("\n");
    writeFileSync(join(workspace, "big.txt"), lines);
    const window = 2000;
    let calls = 0;
    server.script(
      {
        match: { system: SUMMARIZER_PROMPT.slice(0, 40) },
        reply: { text: "Summary: read big.txt in slices so far." },
        times: Number.POSITIVE_INFINITY,
      },
      {
        match: { system: '"worker"' },
        reply: () =>
          ++calls < 200
            ? {
                toolCalls: [
                  {
                    name: "read_file",
                    arguments: { path: "big.txt", offset: 1 + ((calls * 2) % 390), limit: 2 },
                  },
                ],
              }
            : { text: "Read it all." },
        times: 200,
      },
    );
    const rt = await runtime({ budget: { maxTurns: 250 } }, { contextWindow: window });
    const handle = rt.start({ task: "Read big.txt two lines at a time." });
    const output = await handle.done;
    expect(output).toMatchObject({ reason: "done", result: "Read it all.", turns: 200, toolCalls: 199 });
    server.assertComplete();

    const sizes = server.requests.map(
      ({ body }) =>
        countMessagesTokens(body.messages) + (body.tools ? countTextTokens(JSON.stringify(body.tools)) : 0),
    );
    expect(Math.max(...sizes)).toBeLessThanOrEqual(window);
    const events = await eventsOf(rt, handle.runId);
    const compactions = events
      .filter((e) => e.type === "context.compacted")
      .map((e) => e.data as AgentEventMap["context.compacted"]);
    expect(compactions.length).toBeGreaterThan(3);
    for (const c of compactions) expect(c.tokensAfter).toBeLessThan(c.tokensBefore);
    // Summaries are model calls, and their usage is counted in the agent's.
    const summaries = server.requests.filter((r) => r.body.messages[0]?.content === SUMMARIZER_PROMPT).length;
    expect(summaries).toBeGreaterThan(0);
    const completed = events
      .filter((e) => e.type === "model.completed")
      .map((e) => e.data as AgentEventMap["model.completed"]);
    const summed = completed.reduce((n, c) => n + c.usage.inputTokens, 0);
    expect(output.usage.inputTokens).toBeGreaterThan(summed);
    await rt.close();
  }, 120_000);

  it("counts the tool specs and the reply's reserve in a request: either alone pushing it over the threshold starts a compaction", async () => {
    const lines = Array.from({ length: 60 }, (_, i) => `line ${i}: ${"data ".repeat(6)}`).join("\n");
    writeFileSync(join(workspace, "medium.txt"), lines);
    /** The second request of a run under this window, and whether a compaction came before it. */
    const secondRequest = async (contextWindow: number) => {
      const before = server.requests.length;
      server.script(
        {
          match: { system: '"worker"', turn: 1 },
          reply: { toolCalls: [{ name: "read_file", arguments: { path: "medium.txt" } }] },
        },
        { match: { system: '"worker"', turn: 2 }, reply: { text: "read" } },
      );
      const rt = await runtime({ tools: ["read_file", "list_dir", "glob", "grep"] }, { contextWindow });
      const handle = rt.start({ task: "Read medium.txt." });
      expect((await handle.done).reason).toBe("done");
      const compacted = (await eventsOf(rt, handle.runId)).filter((e) => e.type === "context.compacted");
      await rt.close();
      const body = server.requests[before + 1]?.body;
      if (!body) throw new Error("no second request");
      const messages = countMessagesTokens(body.messages);
      const specs = countToolSpecTokens(
        body.tools?.map(({ function: f }) => ({ ...f, description: f.description ?? "" }) as ToolSpec),
      );
      return { compacted: compacted.length > 0, messages, specs };
    };
    const { compacted, messages, specs } = await secondRequest(1_000_000);
    expect(compacted).toBe(false);
    expect(specs).toBeGreaterThan(300);
    // Compaction starts when messages + specs + the reply's reserve (a tenth of the window) pass 80 %.
    // Here the messages and the reserve fit (messages < 70 %); the specs push it over.
    const specsOver = Math.round((messages + specs / 2) / 0.7);
    expect((await secondRequest(specsOver)).compacted).toBe(true);
    // Here messages and specs fit (under 80 %); the reserve pushes it over.
    const reserveOver = Math.round((messages + specs) / 0.75);
    expect((await secondRequest(reserveOver)).compacted).toBe(true);
    // And with room for all three, nothing is compacted.
    expect((await secondRequest(Math.round((messages + specs) / 0.6))).compacted).toBe(false);
  });

  it("compacts and retries once when the provider says the context is too long", async () => {
    server.script(
      {
        match: { system: '"worker"' },
        reply: {
          error: { status: 400, code: "context_length_exceeded", message: "maximum context length exceeded" },
        },
      },
      {
        match: { system: SUMMARIZER_PROMPT.slice(0, 40) },
        reply: { text: "summary" },
        times: Number.POSITIVE_INFINITY,
      },
      { match: { system: '"worker"' }, reply: { text: "fits now" } },
    );
    const rt = await runtime({});
    const handle = rt.start({ task: "Hello" });
    const output = await handle.done;
    expect(output).toMatchObject({ reason: "done", result: "fits now" });
    const events = await eventsOf(rt, handle.runId);
    expect(
      events.filter((e) => e.type === "state.changed").map((e) => (e.data as { to: string }).to),
    ).toEqual(["callingModel", "compacting", "callingModel", "stopped"]);
    await rt.close();
  });

  it("publishes every event with a gap-free seq, and the run's usage and cost", async () => {
    server.script(
      {
        match: { turn: 1 },
        reply: { text: "Let me see.", toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
      },
      { match: { turn: 2 }, reply: { text: "It lists one and two." } },
    );
    const rt = await runtime({});
    const handle = rt.start({ task: "What is in notes.txt?" });
    const output = await handle.done;
    const events = await eventsOf(rt, handle.runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i));
    expect(events.every((e) => e.agentId === handle.agentId && e.parentId === undefined)).toBe(true);
    expect(events[0]).toMatchObject({
      type: "agent.started",
      data: { name: "worker", model: "scripted", task: "What is in notes.txt?" },
    });
    const deltas = events
      .filter((e) => e.type === "model.delta")
      .map((e) => (e.data as { text: string }).text);
    expect(deltas.join("")).toBe("Let me see.It lists one and two.");
    const completed = events
      .filter((e) => e.type === "model.completed")
      .map((e) => e.data as AgentEventMap["model.completed"]);
    expect(completed.map((c) => c.finishReason)).toEqual(["tool_calls", "stop"]);
    expect(output.usage.inputTokens).toBe(completed.reduce((n, c) => n + c.usage.inputTokens, 0));
    expect(events.at(-1)).toMatchObject({
      type: "agent.stopped",
      data: { reason: "done", turns: 2, toolCalls: 1 },
    });
    await rt.close();
  });

  it("shows the model a result's artifacts and next actions inside its output, and puts them in tool.finished", async () => {
    const make = defineTool({
      name: "make",
      description: "Makes files.",
      effect: "read",
      parameters: z.object({}),
      execute: () => ({
        ok: true,
        output: "made two files",
        artifacts: ["src/a.ts", "src/b.ts"],
        nextActions: ['grep {"pattern":"export","path":"src"}'],
      }),
    }) as Tool;
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "make", arguments: {} }] } },
      { match: { turn: 2 }, reply: { text: "Made." } },
    );
    const rt = await runtime({ tools: ["make"] }, { tools: [make] });
    const handle = rt.start({ task: "Make files" });
    await handle.done;
    const toolMessage = server.requests[1]?.body.messages.find((m) => m.role === "tool");
    expect(toolMessage?.content).toBe(
      '<tool_output source="make">\nmade two files\nartifacts: src/a.ts, src/b.ts\nnext: grep {"pattern":"export","path":"src"}\n</tool_output>',
    );
    const finished = (await eventsOf(rt, handle.runId)).find((e) => e.type === "tool.finished");
    expect(finished?.data).toMatchObject({
      name: "make",
      ok: true,
      artifacts: ["src/a.ts", "src/b.ts"],
      nextActions: ['grep {"pattern":"export","path":"src"}'],
    });
    await rt.close();
  });

  it("stops with the text of the tools when every result of a batch says terminate, not their wrapped output", async () => {
    const finish = defineTool({
      name: "finish",
      description: "Gives the final answer.",
      effect: "read",
      parameters: z.object({ answer: z.string() }),
      execute: ({ answer }) => ({ ok: true, output: answer, terminate: true }),
    }) as Tool;
    server.script({
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "finish", arguments: { answer: "The answer is <42>." } }] },
    });
    const rt = await runtime({ tools: ["finish"] }, { tools: [finish] });
    const handle = rt.start({ task: "Answer" });
    const output = await handle.done;
    expect(output).toMatchObject({ reason: "done", result: "The answer is <42>.", turns: 1, toolCalls: 1 });
    expect(server.requests).toHaveLength(1);
    await rt.close();
  });

  it("aborts running tools promptly through their signal", async () => {
    let toolSignal: AbortSignal | undefined;
    const wait = defineTool({
      name: "wait",
      description: "Waits for a long time.",
      effect: "read",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_, reject) => {
          toolSignal = signal;
          signal.addEventListener("abort", () => reject(new Error("cancelled")));
        }),
    }) as Tool;
    server.script({ reply: { toolCalls: [{ name: "wait", arguments: {} }] } });
    const rt = await runtime({ tools: ["wait"] }, { tools: [wait] });
    const handle = rt.start({ task: "Wait" });
    const toolRunning = (async () => {
      for await (const e of rt.bus.eventLog.read({ runId: handle.runId, follow: true }))
        if (e.envelope.type === "tool.started") return;
    })();
    await toolRunning;
    handle.steer("kept for later");
    const started = Date.now();
    handle.abort();
    const output = await handle.done;
    expect(Date.now() - started).toBeLessThan(500);
    expect(output.reason).toBe("aborted");
    expect(toolSignal?.aborted).toBe(true);
    await rt.close();
  });
});
