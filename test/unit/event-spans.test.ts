import {
  AlwaysOffSampler,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { describe, expect, it } from "vitest";
import type { AgentEventMap, AgentEventType } from "../../src/events/agent-events.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import { Telemetry } from "../../src/telemetry/telemetry.js";

/* The spans an agent's events make: the rules the live hosts and `troupe export-trace` share. */

const usage = { inputTokens: 10, outputTokens: 5, cachedInputTokens: 2, costUsd: 0.001 };
const stopped = {
  reason: "done" as const,
  result: "ok",
  usage,
  turns: 1,
  toolCalls: 1,
  total: { usage, toolCalls: 1 },
};

/** An agent's events, one a millisecond from `t0`. */
function agent(agentId = "lead-1", runId = "run-1") {
  let seq = 0;
  const t0 = 1_700_000_000_000;
  return <T extends AgentEventType>(type: T, data: AgentEventMap[T]): Envelope =>
    makeEnvelope({ runId, agentId, seq: seq++, type, data }, t0 + seq * 1000);
}

function provider(options: { sampler?: AlwaysOffSampler } = {}) {
  const spans = new InMemorySpanExporter();
  const tracerProvider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: spans })],
    ...(options.sampler ? { sampler: options.sampler } : {}),
  });
  return { spans, tracerProvider };
}

const started = { name: "lead", model: "m", task: "Do it", budget: {}, depth: 0 };
const calling = { from: "idle", to: "callingModel" };
const completed = (toolCalls: number) => ({
  model: "m",
  usage,
  finishReason: toolCalls ? ("tool_calls" as const) : ("stop" as const),
  toolCalls,
});
const names = (spans: InMemorySpanExporter) => spans.getFinishedSpans().map((s) => s.name);

describe("spans from events", () => {
  it("a process that goes on with an agent makes the spans that were open, once, with their ids and times; none it had ended again", async () => {
    const e = agent();
    const history = [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.completed", completed(1)),
      e("tool.requested", {
        callId: "c1",
        name: "shell",
        arguments: "{}",
        effect: "execute",
        decision: "allow",
      }),
      e("state.changed", { from: "callingModel", to: "executingTools" }),
      e("tool.started", { callId: "c1", name: "shell" }),
    ];
    // The first host made what ended while it had the agent: the first model call.
    const first = provider();
    const before = new Telemetry({ tracerProvider: first.tracerProvider });
    for (const event of history) before.take(event);
    expect(names(first.spans)).toEqual(["chat m"]);

    const second = provider();
    const after = new Telemetry({ tracerProvider: second.tracerProvider });
    after.resuming({ runId: "run-1", agentId: "lead-1", name: "lead", model: "m" }, Promise.resolve(history));
    // What it publishes before its history is read waits for it.
    after.take(e("tool.finished", { callId: "c1", name: "shell", ok: true, durationMs: 5 }));
    await new Promise((resolve) => setImmediate(resolve));
    after.take(e("state.changed", calling));
    after.take(e("model.completed", completed(0)));
    after.take(e("agent.stopped", stopped));
    const made = second.spans.getFinishedSpans();
    expect(made.map((s) => s.name).sort()).toEqual(
      [
        "chat m",
        "execute_tool shell",
        "invoke_agent lead",
        "invoke_workflow lead",
        "resume_agent lead",
      ].sort(),
    );
    const byName = (name: string) => made.find((s) => s.name === name);
    const tool = byName("execute_tool shell");
    // The spans left open are made with the times the first host had, under the same ids: the first
    // host's model call is under the agent span the second one made.
    expect(tool?.startTime).toEqual([1_700_000_004, 0]);
    expect(tool?.parentSpanContext?.spanId).toBe(byName("invoke_agent lead")?.spanContext().spanId);
    expect(first.spans.getFinishedSpans()[0]?.parentSpanContext?.spanId).toBe(
      byName("invoke_agent lead")?.spanContext().spanId,
    );
    const resume = byName("resume_agent lead");
    expect(resume?.links.map((l) => l.context.spanId)).toEqual([tool?.spanContext().spanId]);
    expect(byName("chat m")?.parentSpanContext?.spanId).toBe(resume?.spanContext().spanId);
  });

  it("a call the policy denied ends as not run when the next turn begins; an approval's wait is a span under its call", () => {
    const { spans, tracerProvider } = provider();
    const telemetry = new Telemetry({ tracerProvider });
    const e = agent();
    for (const event of [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.completed", completed(2)),
      e("tool.requested", {
        callId: "d",
        name: "shell",
        arguments: "{}",
        effect: "execute",
        decision: "deny",
        error: "denied by the policy",
      }),
      e("tool.requested", {
        callId: "w",
        name: "write_file",
        arguments: "{}",
        effect: "write",
        decision: "ask",
      }),
      e("approval.requested", {
        callId: "w",
        name: "write_file",
        arguments: "{}",
        effect: "write",
        detail: "",
        paths: [],
      }),
      e("approval.decided", { callId: "w", approved: true, by: "ann" }),
      e("tool.started", { callId: "w", name: "write_file" }),
      e("tool.finished", { callId: "w", name: "write_file", ok: true, durationMs: 3 }),
      e("state.changed", calling),
      e("model.completed", completed(0)),
      e("agent.stopped", stopped),
    ])
      telemetry.take(event);
    const made = spans.getFinishedSpans();
    const denied = made.find((s) => s.name === "execute_tool shell");
    expect(denied?.status).toEqual({ code: 2, message: "denied by the policy" });
    const wait = made.find((s) => s.name === "await_approval write_file");
    const write = made.find((s) => s.name === "execute_tool write_file");
    expect(wait?.parentSpanContext?.spanId).toBe(write?.spanContext().spanId);
    expect(write?.attributes).toMatchObject({
      "troupe.approval.by": "ann",
      "troupe.approval.approved": true,
      "troupe.approval.wait_ms": 1000,
    });
  });

  it("an agent reopened after it stopped (a follow-up) makes a new stretch of spans, with ids of its own", async () => {
    const { spans, tracerProvider } = provider();
    const telemetry = new Telemetry({ tracerProvider });
    const e = agent();
    const first = [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.completed", completed(0)),
      e("agent.stopped", stopped),
    ];
    for (const event of first) telemetry.take(event);
    // Reopened, it is resumed from its events, as its host does.
    telemetry.resuming(
      { runId: "run-1", agentId: "lead-1", name: "lead", model: "m" },
      Promise.resolve(first),
    );
    await new Promise((resolve) => setImmediate(resolve));
    for (const event of [
      e("state.changed", calling),
      e("model.completed", completed(0)),
      e("agent.stopped", stopped),
    ])
      telemetry.take(event);
    const made = spans.getFinishedSpans();
    expect(made.filter((s) => s.name === "resume_agent lead")).toEqual([]);
    const agents = made.filter((s) => s.name === "invoke_agent lead");
    expect(agents).toHaveLength(2);
    expect(new Set(made.map((s) => s.spanContext().spanId)).size).toBe(made.length);
    expect(new Set(made.map((s) => s.spanContext().traceId)).size).toBe(1);
  });

  it("under a sampler that records nothing, nothing is made", () => {
    const { spans, tracerProvider } = provider({ sampler: new AlwaysOffSampler() });
    const telemetry = new Telemetry({ tracerProvider });
    const e = agent();
    for (const event of [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.completed", completed(0)),
      e("agent.stopped", stopped),
    ])
      telemetry.take(event);
    expect(names(spans)).toEqual([]);
  });

  it("with content captured: the turn's new input and its answer, as the events hold them", () => {
    const { spans, tracerProvider } = provider();
    const telemetry = new Telemetry({ tracerProvider, captureContent: true });
    const e = agent();
    for (const event of [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.delta", { text: "Let me look." }),
      e("model.completed", completed(1)),
      e("tool.requested", {
        callId: "c",
        name: "read_file",
        arguments: '{"path":"a"}',
        effect: "read",
        decision: "allow",
      }),
      e("tool.started", { callId: "c", name: "read_file" }),
      e("tool.finished", { callId: "c", name: "read_file", ok: true, durationMs: 1, preview: "alpha" }),
      e("state.changed", calling),
      e("model.delta", { text: "Done." }),
      e("model.completed", completed(0)),
      e("agent.stopped", stopped),
    ])
      telemetry.take(event);
    const chats = spans.getFinishedSpans().filter((s) => s.name === "chat m");
    expect(JSON.parse(chats[0]?.attributes["gen_ai.output.messages"] as string)).toEqual([
      {
        role: "assistant",
        parts: [
          { type: "text", content: "Let me look." },
          { type: "tool_call", id: "c", name: "read_file", arguments: '{"path":"a"}' },
        ],
        finish_reason: "tool_calls",
      },
    ]);
    expect(JSON.parse(chats[1]?.attributes["gen_ai.input.messages"] as string)).toEqual([
      { role: "tool", parts: [{ type: "tool_call_response", id: "c", response: "alpha" }] },
    ]);
  });

  it("a retry and a fallback are events on their model call; a compaction is a span of its own", () => {
    const { spans, tracerProvider } = provider();
    const telemetry = new Telemetry({ tracerProvider });
    const e = agent();
    for (const event of [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.retrying", {
        model: "m",
        attempt: 1,
        maxRetries: 3,
        delayMs: 500,
        error: "503 from the server",
      }),
      e("model.completed", { ...completed(0), model: "fallback" }),
      e("state.changed", { from: "callingModel", to: "compacting" }),
      e("context.compacted", { tokensBefore: 9000, tokensAfter: 1200, pruned: 3, summarized: 10, usage }),
      e("agent.stopped", stopped),
    ])
      telemetry.take(event);
    const made = spans.getFinishedSpans();
    const chat = made.find((s) => s.name === "chat m");
    expect(chat?.events.map((event) => event.name)).toEqual(["gen_ai.client.retry", "troupe.model.fallback"]);
    expect(chat?.events[0]?.attributes).toMatchObject({
      "troupe.retry.attempt": 1,
      "error.type": "503 from the server",
    });
    expect(chat?.attributes["gen_ai.response.model"]).toBe("fallback");
    const compaction = made.find((s) => s.name === "compact_context");
    expect(compaction?.attributes).toMatchObject({
      "troupe.compaction.tokens_before": 9000,
      "troupe.compaction.tokens_after": 1200,
    });
    expect(compaction?.startTime).toEqual([1_700_000_005, 0]);
  });

  it("a tracer that throws never stops the agent: the failure is told once, and the events go on", () => {
    const failures: unknown[] = [];
    const broken = {
      getTracer: () => ({
        startSpan: () => {
          throw new Error("exporter gone");
        },
        startActiveSpan: () => {
          throw new Error("exporter gone");
        },
      }),
    };
    const telemetry = new Telemetry({
      tracerProvider: broken as never,
      failed: (error) => failures.push(error),
    });
    const e = agent();
    const events = [
      e("agent.started", started),
      e("state.changed", calling),
      e("model.completed", completed(0)),
      e("agent.stopped", stopped),
    ];
    expect(() => {
      for (const event of [...events, ...events]) telemetry.take(event);
    }).not.toThrow();
    expect(failures).toHaveLength(1);
    expect(String(failures[0])).toContain("exporter gone");
  });

  it("a stored run whose lead was started in a job's trace keeps its subagents in it, though their starts name none", () => {
    const { spans, tracerProvider } = provider();
    const telemetry = new Telemetry({ tracerProvider });
    const lead = agent("lead-1");
    const child = agent("kid-1");
    const job = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const first = lead("agent.started", started);
    for (const event of [
      { ...first, trace: job },
      lead("state.changed", calling),
      lead("model.completed", completed(1)),
      lead("tool.requested", {
        callId: "c",
        name: "subagent_kid",
        arguments: "{}",
        effect: "read",
        decision: "allow",
      }),
      lead("tool.started", { callId: "c", name: "subagent_kid" }),
      lead("subagent.spawned", { childId: "kid-1", callId: "c", name: "kid", task: "t", budget: {} }),
      {
        ...child("agent.started", { ...started, name: "kid", depth: 1, parentId: "lead-1" }),
        parentId: "lead-1",
      },
      child("agent.stopped", stopped),
      lead("tool.finished", { callId: "c", name: "subagent_kid", ok: true, durationMs: 5 }),
      lead("agent.stopped", stopped),
    ])
      telemetry.take(event);
    const made = spans.getFinishedSpans();
    expect(new Set(made.map((s) => s.spanContext().traceId))).toEqual(
      new Set(["4bf92f3577b34da6a3ce929d0e0e4736"]),
    );
    const call = made.find((s) => s.name === "execute_tool subagent_kid");
    expect(made.find((s) => s.name === "invoke_agent kid")?.parentSpanContext?.spanId).toBe(
      call?.spanContext().spanId,
    );
  });
});
