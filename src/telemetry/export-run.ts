import { hostname } from "node:os";
import type { ExportResult } from "@opentelemetry/core";
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace";
import type { TelemetryConfig } from "../config/telemetry-schema.js";
import type { Envelope } from "../events/envelope.js";
import { EventSpans } from "./event-spans.js";
import { exportersFor, grpcChosen, resourceOf } from "./otel-setup.js";
import { ChosenIds } from "./span-ids.js";
import { SCOPE } from "./telemetry.js";

/** Where a stored run's spans go: an OTLP endpoint (troupe.yaml's, the environment's, or this one), or a file. */
export type TraceTarget = { endpoint?: string; protocol?: TelemetryConfig["protocol"] } | { file: string };

/** Spans a request carries at most (the SDK's batch size). */
const BATCH = 512;

/**
 * A stored run's spans, made from its events as the hosts that ran it would have made them (the same
 * ids, names and attributes): what `troupe export-trace` sends. Agents still going end where their
 * events end, marked so.
 */
export async function spansOfRun(
  events: Iterable<Envelope> | AsyncIterable<Envelope>,
  config: TelemetryConfig,
  providerOf: (model: string) => string | undefined,
): Promise<ReadableSpan[]> {
  const { TracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = await import(
    "@opentelemetry/sdk-trace"
  );
  const memory = new InMemorySpanExporter();
  const ids = new ChosenIds();
  const provider = new TracerProvider({
    resource: await resourceOf(config, { "host.name": hostname(), "troupe.role": "export-trace" }),
    idGenerator: ids,
    spanProcessors: [new SimpleSpanProcessor({ exporter: memory })],
  });
  const spans = new EventSpans({
    tracer: provider.getTracer(SCOPE),
    ids,
    captureContent: config.captureContent,
    providerOf,
    sampled: () => true,
  });
  for await (const envelope of events) spans.take(envelope);
  spans.endAll();
  await provider.forceFlush();
  // Taken before the shutdown, which empties the exporter.
  const made = [...memory.getFinishedSpans()];
  await provider.shutdown();
  return made;
}

/** Sends `spans` to an OTLP endpoint, a batch a request; throws what the first failed request said. */
export async function sendSpans(
  spans: readonly ReadableSpan[],
  config: TelemetryConfig,
  env: NodeJS.ProcessEnv,
  target: { endpoint?: string; protocol?: TelemetryConfig["protocol"] },
): Promise<void> {
  const chosen = {
    ...config,
    ...(target.endpoint ? { endpoint: target.endpoint } : {}),
    ...(target.protocol ? { protocol: target.protocol } : {}),
    metrics: false,
  };
  const { traces } = await exportersFor(chosen, grpcChosen(chosen, env), env);
  try {
    for (let at = 0; at < spans.length; at += BATCH) await exportBatch(traces, spans.slice(at, at + BATCH));
  } finally {
    await traces.shutdown();
  }
}

function exportBatch(exporter: SpanExporter, spans: ReadableSpan[]): Promise<void> {
  return new Promise((resolve, reject) =>
    exporter.export(spans, (result: ExportResult) =>
      result.code === 0 ? resolve() : reject(result.error ?? new Error("the export failed")),
    ),
  );
}

/** The spans as one OTLP/JSON `ExportTraceServiceRequest` (what a collector's file receiver reads). */
export async function otlpJson(spans: ReadableSpan[]): Promise<Uint8Array> {
  const { JsonTraceSerializer } = await import("@opentelemetry/otlp-transformer");
  return JsonTraceSerializer.serializeRequest(spans) ?? new Uint8Array();
}
