import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import type { ApprovalRequest, Approver } from "../../src/approvals/approver.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { EVERYTHING } from "../support/mcp-servers.js";
import { collect } from "../support/wait.js";

/*
 * MCP's sampling with a real server: server-everything's `trigger-sampling-request` asks the client
 * for a completion while it runs (it offers the tool only to a client that declares `sampling`).
 * The agent answers with its own model (the scripted server, over HTTP), charged to its budget,
 * asked of a person as a call of `everything__sampling` is.
 */

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "README.md": "# project\n" }));
});
afterEach(async () => {
  await model.close();
  dispose();
});

const PRICES = { inputPerMTok: 1_000_000, outputPerMTok: 1_000_000 };
const agent = (extra: Record<string, unknown> = {}) => ({
  name: "lead",
  description: "Leads.",
  tools: ["everything__trigger-sampling-request"],
  ...extra,
});

async function runtime(
  options: {
    approval?: string;
    autoApprove?: string[];
    approver?: Approver;
    agent?: Record<string, unknown>;
  } = {},
) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      approval: { policy: options.approval ?? "yolo" },
      providers: { openai: { baseURL: model.baseURL, models: { scripted: PRICES } } },
      mcpServers: {
        everything: {
          command: process.execPath,
          args: [EVERYTHING],
          ...(options.autoApprove ? { autoApprove: options.autoApprove } : {}),
        },
      },
    },
    [agent(options.agent)],
  );
  return new Runtime({
    config,
    workspace: ws,
    env: {},
    ...(options.approver ? { approver: options.approver } : {}),
  }).open();
}

/** The lead calls the sampling tool once, then answers with what the tool said. */
function scriptSampling(samplingReply: string) {
  model.script(
    {
      match: { system: '"lead"', turn: 1 },
      reply: {
        toolCalls: [
          { name: "everything__trigger-sampling-request", arguments: { prompt: "a haiku", maxTokens: 40 } },
        ],
      },
    },
    {
      match: { system: "helpful test server" },
      reply: { text: samplingReply },
    },
    {
      match: { system: '"lead"', turn: 2 },
      reply: (request) => ({
        text: `the tool said: ${String(request.messages.at(-1)?.content).slice(0, 400)}`,
      }),
    },
  );
}

const samplingRequests = () =>
  model.requests.filter((r) => /helpful test server/.test(String(r.body.messages[0]?.content)));

async function eventsOf(rt: Runtime, runId: string): Promise<Envelope[]> {
  return (await collect(rt.bus.eventLog.read({ runId }))).map((e) => e.envelope);
}

/** The usage an event says (`model.completed`, `sampling.finished`). */
function usageOf(envelope: Envelope | undefined): { inputTokens: number; outputTokens: number } {
  const data = envelope?.data as { usage?: { inputTokens: number; outputTokens: number } } | undefined;
  if (!data?.usage) throw new Error(`no usage in ${envelope?.type ?? "a missing event"}`);
  return data.usage;
}

/** The tokens of an agent's own turns, from its events' `model.completed`. */
function turnTokens(events: Envelope[]): number {
  return events
    .filter((e) => e.type === "model.completed")
    .reduce((n, e) => n + usageOf(e).inputTokens + usageOf(e).outputTokens, 0);
}

describe("MCP sampling", () => {
  it("answers a server's request with the agent's own model, max_tokens passed, charged to the agent", async () => {
    scriptSampling("Autumn wind whispers");
    const rt = await runtime();
    const handle = rt.start({ task: "ask the server to sample", agent: "lead" });
    const output = await handle.done;
    expect(output.reason).toBe("done");
    const asked = samplingRequests();
    expect(asked).toHaveLength(1);
    expect(asked[0]?.body.max_tokens).toBe(40);
    expect(asked[0]?.body.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(asked[0]?.body.messages[1]?.content).toContain("a haiku");
    // The server got the completion, and the tool handed it back.
    expect(output.result).toContain("Autumn wind whispers");
    expect(output.result).toContain('"model": "scripted"');
    const events = await eventsOf(rt, handle.runId);
    const finished = events.find((e) => e.type === "sampling.finished");
    expect(finished?.data).toMatchObject({ server: "everything", model: "scripted", stopReason: "endTurn" });
    // What it cost is the agent's, beside its own two turns.
    const sampled = usageOf(finished);
    expect(sampled.inputTokens).toBeGreaterThan(0);
    expect(output.usage.inputTokens + output.usage.outputTokens).toBe(
      turnTokens(events) + sampled.inputTokens + sampled.outputTokens,
    );
    await rt.close();
  });

  it("asks a person under `ask`, as a call of SERVER__sampling; a refusal reaches the server as a rejection and no model is called", async () => {
    scriptSampling("never made");
    const asked: ApprovalRequest[] = [];
    const approver: Approver = {
      decide: async (request) => {
        asked.push(request);
        if (request.tool === "everything__sampling")
          return { approved: false, by: "user", reason: "not now" };
        return { approved: true, by: "user" };
      },
    };
    const rt = await runtime({ approval: "ask", approver });
    const handle = rt.start({ task: "ask the server to sample", agent: "lead" });
    const output = await handle.done;
    expect(asked.map((r) => r.tool)).toEqual([
      "everything__trigger-sampling-request",
      "everything__sampling",
    ]);
    const question = asked[1] as ApprovalRequest;
    expect(question.detail).toContain("You are a helpful test server.");
    expect(question.detail).toContain("a haiku");
    expect(question.callId).toMatch(/-sampling-1$/);
    expect(samplingRequests()).toHaveLength(0);
    expect(output.result).toContain("not now");
    const events = await eventsOf(rt, handle.runId);
    expect(events.find((e) => e.type === "sampling.finished")?.data).toMatchObject({
      server: "everything",
      refused: expect.stringContaining("not now"),
    });
    await rt.close();
  });

  it("is not asked when the server's autoApprove names sampling", async () => {
    scriptSampling("made without asking");
    const asked: string[] = [];
    const approver: Approver = {
      decide: async (request) => {
        asked.push(request.tool);
        return { approved: true, by: "user" };
      },
    };
    const rt = await runtime({
      approval: "ask",
      approver,
      autoApprove: ["sampling", "trigger-sampling-request"],
    });
    const output = await rt.start({ task: "sample", agent: "lead" }).done;
    expect(asked).toEqual([]);
    expect(samplingRequests()).toHaveLength(1);
    expect(output.result).toContain("made without asking");
    await rt.close();
  });

  it("is never made under never-ask (the tool itself allowed by autoApprove)", async () => {
    scriptSampling("never made");
    const rt = await runtime({ approval: "never-ask", autoApprove: ["trigger-sampling-request"] });
    const output = await rt.start({ task: "sample", agent: "lead" }).done;
    expect(samplingRequests()).toHaveLength(0);
    expect(output.result).toContain("never-ask");
    await rt.close();
  });

  it("gives at most what the agent's token budget leaves, and refuses once it is spent", async () => {
    // The first turn's tokens, as the agent's first model call counts them.
    scriptSampling("measured");
    const measure = await runtime();
    const first = measure.start({ task: "sample", agent: "lead" });
    await first.done;
    const completed = (await eventsOf(measure, first.runId)).find((e) => e.type === "model.completed");
    const usage = usageOf(completed);
    const turn1 = usage.inputTokens + usage.outputTokens;
    await measure.close();
    const before = samplingRequests().length;

    scriptSampling("short");
    const tight = await runtime({ agent: { budget: { maxTokens: turn1 + 10 } } });
    await tight.start({ task: "sample", agent: "lead" }).done;
    expect(samplingRequests()).toHaveLength(before + 1);
    expect(samplingRequests().at(-1)?.body.max_tokens).toBe(10);
    await tight.close();

    scriptSampling("never made");
    const spent = await runtime({ agent: { budget: { maxTokens: turn1 } } });
    const handle = spent.start({ task: "sample", agent: "lead" });
    await handle.done;
    expect(samplingRequests()).toHaveLength(before + 1);
    const refused = (await eventsOf(spent, handle.runId)).find((e) => e.type === "sampling.finished");
    expect(refused?.data).toMatchObject({ refused: expect.stringContaining("budget is spent") });
    await spent.close();
  });
});
