import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterEach, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { createRuntime } from "../../src/library.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";

/*
 * A program with its own OpenTelemetry setup gives Troupe its providers: Troupe's spans are made by
 * the program's tracer provider, inside the span the program started the run in, and its metrics
 * are read by the program's meter provider.
 */

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a run started inside a program's span is in the program's trace, made by the program's providers", async () => {
  const contexts = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contexts);
  cleanups.push(() => context.disable());
  const spans = new InMemorySpanExporter();
  const tracerProvider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: spans })],
  });
  const metrics = new InMemoryMetricExporter(0);
  const meterProvider = new MeterProvider({
    readers: [new PeriodicExportingMetricReader({ exporter: metrics, exportIntervalMillis: 60_000 })],
  });
  const model = await ScriptedModelServer.start([
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "read_file", arguments: { path: "a.txt" } }] } },
    { match: { turn: 2 }, reply: { text: "It says alpha." } },
  ]);
  cleanups.push(() => model.close());
  const { dir, dispose } = tempTree({ "a.txt": "alpha\n" });
  cleanups.push(dispose);
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  cleanups.push(() => removePrefix(url, prefix));
  const rt = await createRuntime({
    settings: {
      nats: { prefix },
      defaultModel: "scripted",
      providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
    },
    agents: [{ name: "reader", description: "Reads.", tools: ["read_file"] }],
    nats: url,
    workspace: dir,
    env: {},
    telemetry: { tracerProvider, meterProvider },
  });
  cleanups.push(() => rt.close());

  const app = tracerProvider.getTracer("the-program");
  const { output, appSpan } = await app.startActiveSpan("handle request", async (span) => {
    const done = await rt.start({ task: "What does a.txt say?" }).done;
    span.end();
    return { output: done, appSpan: span.spanContext() };
  });
  expect(output.reason).toBe("done");
  await tracerProvider.forceFlush();

  const finished = spans.getFinishedSpans();
  const troupe = finished.filter((s) => s.instrumentationScope.name === "troupe");
  expect(troupe.map((s) => s.name).sort()).toEqual([
    "chat scripted",
    "chat scripted",
    "execute_tool read_file",
    "invoke_agent reader",
    "invoke_workflow reader",
  ]);
  // All in the program's trace: the run's root span is under the program's span.
  for (const span of troupe) expect(span.spanContext().traceId).toBe(appSpan.traceId);
  const root = troupe.find((s) => s.name === "invoke_workflow reader");
  expect(root?.parentSpanContext?.spanId).toBe(appSpan.spanId);
  const agent = troupe.find((s) => s.name === "invoke_agent reader");
  expect(agent?.parentSpanContext?.spanId).toBe(root?.spanContext().spanId);
  const byId = new Map(troupe.map((s) => [s.spanContext().spanId, s.name]));
  for (const span of troupe.filter((s) => s !== root))
    expect(byId.has(span.parentSpanContext?.spanId as string), span.name).toBe(true);
  // Content is off unless asked for.
  for (const span of troupe) expect(Object.keys(span.attributes)).not.toContain("gen_ai.input.messages");

  await meterProvider.forceFlush();
  const names = metrics
    .getMetrics()
    .flatMap((r) => r.scopeMetrics.filter((s) => s.scope.name === "troupe"))
    .flatMap((s) => s.metrics.map((m) => m.descriptor.name));
  expect(names).toEqual(expect.arrayContaining(["gen_ai.client.token.usage", "troupe.tool.calls"]));
});
