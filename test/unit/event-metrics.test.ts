import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { expect, it } from "vitest";
import type { AgentEventMap, AgentEventType } from "../../src/events/agent-events.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import { Telemetry } from "../../src/telemetry/telemetry.js";

/* The metrics an agent's events make, read as a program's meter provider reads them. */

const usage = { inputTokens: 100, outputTokens: 40, cachedInputTokens: 0, costUsd: 0.25 };

function agent(agentId: string) {
  let seq = 0;
  return <T extends AgentEventType>(type: T, data: AgentEventMap[T], at: number): Envelope =>
    makeEnvelope({ runId: "run-1", agentId, seq: seq++, type, data }, at);
}

it("tokens by type, call durations, cost by agent and model, tools by outcome, approvals by decision and wait, agents active here, the log's lag", async () => {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const tracerProvider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: new InMemorySpanExporter() })],
  });
  const telemetry = new Telemetry({
    tracerProvider,
    meterProvider,
    providerOf: () => "openai",
    host: { "host.name": "h1" },
  });
  const lead = agent("lead-1");
  const helper = agent("helper-1");
  const t = 1_700_000_000_000;
  for (const event of [
    lead("agent.started", { name: "lead", model: "m", task: "t", budget: {}, depth: 0 }, t),
    helper(
      "agent.started",
      { name: "helper", model: "m", task: "t", budget: {}, depth: 1, parentId: "lead-1" },
      t,
    ),
    lead("state.changed", { from: "idle", to: "callingModel" }, t),
    lead("model.completed", { model: "m", usage, finishReason: "tool_calls", toolCalls: 3 }, t + 2000),
    lead(
      "tool.requested",
      { callId: "a", name: "shell", arguments: "{}", effect: "execute", decision: "ask" },
      t + 2000,
    ),
    lead(
      "tool.requested",
      { callId: "b", name: "shell", arguments: "{}", effect: "execute", decision: "deny" },
      t + 2000,
    ),
    lead(
      "tool.requested",
      { callId: "c", name: "read_file", arguments: "{}", effect: "read", decision: "allow" },
      t + 2000,
    ),
    lead(
      "approval.requested",
      { callId: "a", name: "shell", arguments: "{}", effect: "execute", detail: "", paths: [] },
      t + 2000,
    ),
    lead("approval.decided", { callId: "a", approved: true, by: "ann" }, t + 32_000),
    lead(
      "tool.finished",
      { callId: "a", name: "shell", ok: false, durationMs: 3, error: "exit 1" },
      t + 32_100,
    ),
    lead("tool.finished", { callId: "c", name: "read_file", ok: true, durationMs: 1 }, t + 32_100),
  ])
    telemetry.take(event);
  telemetry.appended(Date.now() - 250);
  await meterProvider.forceFlush();
  const metrics = new Map(
    exporter
      .getMetrics()
      .at(-1)
      ?.scopeMetrics.flatMap((s) => s.metrics)
      .map((m) => [m.descriptor.name, m]),
  );
  const points = (name: string) =>
    (metrics.get(name)?.dataPoints ?? []) as Array<{ attributes: Record<string, unknown>; value: unknown }>;
  const sumOf = (name: string, match: Record<string, unknown>) =>
    points(name).find((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))?.value;

  expect(
    sumOf("gen_ai.client.token.usage", { "gen_ai.token.type": "input", "gen_ai.provider.name": "openai" }),
  ).toMatchObject({ sum: 100, count: 1 });
  expect(sumOf("gen_ai.client.token.usage", { "gen_ai.token.type": "output" })).toMatchObject({ sum: 40 });
  expect(sumOf("gen_ai.client.operation.duration", { "gen_ai.request.model": "m" })).toMatchObject({
    sum: 2,
    count: 1,
  });
  expect(sumOf("troupe.cost", { "gen_ai.agent.name": "lead", "gen_ai.request.model": "m" })).toBe(0.25);
  expect(sumOf("troupe.tool.calls", { "gen_ai.tool.name": "shell", "troupe.outcome": "error" })).toBe(1);
  expect(sumOf("troupe.tool.calls", { "gen_ai.tool.name": "shell", "troupe.outcome": "denied" })).toBe(1);
  expect(sumOf("troupe.tool.calls", { "gen_ai.tool.name": "read_file", "troupe.outcome": "ok" })).toBe(1);
  expect(
    sumOf("troupe.approvals", { "troupe.approval.decision": "approved", "troupe.approval.by": "ann" }),
  ).toBe(1);
  expect(sumOf("troupe.approval.wait", { "troupe.approval.decision": "approved" })).toMatchObject({
    sum: 30,
    count: 1,
  });
  expect(sumOf("troupe.agents.active", { "host.name": "h1" })).toBe(2);
  expect(
    (sumOf("troupe.event_log.lag", { "host.name": "h1" }) as { sum: number }).sum,
  ).toBeGreaterThanOrEqual(0.25);

  // One stops here, the other is taken by another host: none is active here any more.
  telemetry.take(
    helper(
      "agent.stopped",
      { reason: "done", result: "", usage, turns: 1, toolCalls: 0, total: { usage, toolCalls: 0 } },
      t + 40_000,
    ),
  );
  telemetry.released("run-1", "lead-1");
  await meterProvider.forceFlush();
  const latest = exporter
    .getMetrics()
    .at(-1)
    ?.scopeMetrics.flatMap((s) => s.metrics);
  const active = latest?.find((m) => m.descriptor.name === "troupe.agents.active")?.dataPoints[0]?.value;
  expect(active).toBe(0);
  await meterProvider.shutdown();
});
