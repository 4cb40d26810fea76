import { hostname } from "node:os";
import type { Attributes } from "@opentelemetry/api";
import type { Sampler } from "@opentelemetry/sdk-trace";
import type { TelemetryConfig } from "../config/telemetry-schema.js";
import type { Logger } from "../log.js";
import { Telemetry } from "./telemetry.js";

/** How a process that exports says what it is. */
export interface ExportingProcess {
  /** `daemon`, `worker`, `local` (troupe run, chat and resume in this process), `library`, `bench`. */
  role: string;
  env: NodeJS.ProcessEnv;
  providerOf?: (model: string) => string | undefined;
  /** Where a failure of telemetry is said (once): it never stops an agent. */
  log?: Logger | undefined;
}

/** Whether troupe.yaml or the environment turns telemetry on. */
export function telemetryOn(config: TelemetryConfig, env: NodeJS.ProcessEnv): boolean {
  if (/^(true|1)$/i.test(env.OTEL_SDK_DISABLED ?? "")) return false;
  return config.enabled || /^(1|true|on)$/i.test(env.TROUPE_TELEMETRY ?? "");
}

/**
 * The process's telemetry from troupe.yaml's `telemetry` and the standard OpenTelemetry environment
 * (`OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER`):
 * the SDK's providers with OTLP exporters over HTTP/protobuf or gRPC. Undefined when it is off, and
 * then none of the SDK is loaded.
 */
export async function openTelemetry(
  config: TelemetryConfig,
  process: ExportingProcess,
): Promise<Telemetry | undefined> {
  if (!telemetryOn(config, process.env)) return undefined;
  const { env } = process;
  await sayExportFailures(process.log);
  const [{ TracerProvider, BatchSpanProcessor }, { MeterProvider, PeriodicExportingMetricReader }] =
    await Promise.all([import("@opentelemetry/sdk-trace"), import("@opentelemetry/sdk-metrics")]);
  const host = {
    "host.name": hostname(),
    "process.pid": globalThis.process.pid,
    "troupe.role": process.role,
  };
  const resource = await resourceOf(config, host);
  const { traces, metrics } = await exportersFor(config, grpcChosen(config, env), env);
  const tracerProvider = new TracerProvider({
    resource,
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: traces,
        ...positive("scheduledDelayMillis", env.OTEL_BSP_SCHEDULE_DELAY),
        ...positive("maxQueueSize", env.OTEL_BSP_MAX_QUEUE_SIZE),
        ...positive("maxExportBatchSize", env.OTEL_BSP_MAX_EXPORT_BATCH_SIZE),
        ...positive("exportTimeoutMillis", env.OTEL_BSP_EXPORT_TIMEOUT),
      }),
    ],
    ...(await samplerFrom(env)),
  });
  const meterProvider =
    config.metrics && metrics
      ? new MeterProvider({
          resource,
          readers: [
            new PeriodicExportingMetricReader({
              exporter: metrics,
              ...positive("exportIntervalMillis", env.OTEL_METRIC_EXPORT_INTERVAL),
              ...positive("exportTimeoutMillis", env.OTEL_METRIC_EXPORT_TIMEOUT),
            }),
          ],
        })
      : undefined;
  return new Telemetry({
    tracerProvider,
    meterProvider,
    captureContent: config.captureContent,
    providerOf: process.providerOf,
    host,
    failed: (error) =>
      process.log?.warn(
        { err: error },
        "telemetry failed on an event: the run goes on, its spans may be missing",
      ),
    // A collector that does not answer holds a process's exit at most this long, not the
    // exporters' retries (several seconds).
    shutdown: () =>
      within(SHUTDOWN_MS, Promise.allSettled([tracerProvider.shutdown(), meterProvider?.shutdown()])),
  });
}

/** How long a process waits, as it ends, for what it holds to be sent. */
const SHUTDOWN_MS = 3000;
/** How long one export may take, retries included (the SDK's default is 10 s). */
const EXPORT_TIMEOUT_MS = 3000;

async function within(ms: number, work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  await Promise.race([work, late]);
  clearTimeout(timer);
}

/** What the SDK said, in words: its errors come as an Error, or as one turned into JSON (stack and all). */
function wordsOf(said: unknown): string {
  if (said instanceof Error) return said.message;
  const text = String(said ?? "");
  if (!text.startsWith("{")) return text;
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    return typeof parsed.message === "string" ? parsed.message : text;
  } catch {
    return text;
  }
}

/**
 * The SDK's own complaints (an export that failed: the collector down, a header refused) in the
 * process's log, the first only: a run goes on whatever its telemetry does.
 */
async function sayExportFailures(log: Logger | undefined): Promise<void> {
  if (!log) return;
  const { diag, DiagLogLevel } = await import("@opentelemetry/api");
  let said = false;
  const once = (message: string, ...args: unknown[]) => {
    if (said) return;
    said = true;
    const what = [message, ...args].map(wordsOf).filter(Boolean).join(" ");
    log.warn(`telemetry: ${what}; the run goes on (later failures are not said)`);
  };
  const quiet = () => {};
  diag.setLogger({ error: once, warn: once, info: quiet, debug: quiet, verbose: quiet }, DiagLogLevel.WARN);
}

/** Whether troupe.yaml, else `OTEL_EXPORTER_OTLP_PROTOCOL`, chose gRPC (the default is HTTP/protobuf). */
export function grpcChosen(config: TelemetryConfig, env: NodeJS.ProcessEnv): boolean {
  return (config.protocol ?? env.OTEL_EXPORTER_OTLP_PROTOCOL ?? "http/protobuf") === "grpc";
}

/**
 * What the process's telemetry is of: `service.name` troupe, and `host` (what the process is), under
 * `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, under troupe.yaml's `serviceName`.
 */
export async function resourceOf(config: TelemetryConfig, host: Attributes) {
  const resources = await import("@opentelemetry/resources");
  return resources
    .resourceFromAttributes({ "service.name": "troupe", ...host })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }))
    .merge(
      config.serviceName ? resources.resourceFromAttributes({ "service.name": config.serviceName }) : null,
    );
}

/** `{ [key]: n }` for a variable that holds a positive whole number, else nothing (the SDK's default). */
function positive<K extends string>(key: K, value: string | undefined): Partial<Record<K, number>> {
  const n = Number(value);
  return value !== undefined && Number.isSafeInteger(n) && n > 0 ? ({ [key]: n } as Record<K, number>) : {};
}

/** The OTLP exporters: troupe.yaml's endpoint and headers where it gives them, else the environment's. */
export async function exportersFor(config: TelemetryConfig, grpc: boolean, env: NodeJS.ProcessEnv) {
  const base = config.endpoint?.replace(/\/+$/, "");
  const headers = Object.keys(config.headers).length > 0 ? config.headers : undefined;
  // An export, retries included, gives up after this unless the environment says how long: a
  // collector that is down holds a process's exit no longer.
  const timeoutSet = ["", "TRACES_", "METRICS_"].some((signal) => env[`OTEL_EXPORTER_OTLP_${signal}TIMEOUT`]);
  const timeout = timeoutSet ? {} : { timeoutMillis: EXPORT_TIMEOUT_MS };
  if (grpc) {
    const [{ OTLPTraceExporter }, { OTLPMetricExporter }, { Metadata }] = await Promise.all([
      import("@opentelemetry/exporter-trace-otlp-grpc"),
      import("@opentelemetry/exporter-metrics-otlp-grpc"),
      import("@grpc/grpc-js"),
    ]);
    const metadata = headers ? new Metadata() : undefined;
    for (const [key, value] of Object.entries(headers ?? {})) metadata?.set(key, value);
    const options = { ...(base ? { url: base } : {}), ...(metadata ? { metadata } : {}), ...timeout };
    return {
      traces: new OTLPTraceExporter(options),
      metrics: config.metrics ? new OTLPMetricExporter(options) : undefined,
    };
  }
  const [{ OTLPTraceExporter }, { OTLPMetricExporter }] = await Promise.all([
    import("@opentelemetry/exporter-trace-otlp-proto"),
    import("@opentelemetry/exporter-metrics-otlp-proto"),
  ]);
  const options = (path: string) => ({
    ...(base ? { url: `${base}${path}` } : {}),
    ...(headers ? { headers } : {}),
    ...timeout,
  });
  return {
    traces: new OTLPTraceExporter(options("/v1/traces")),
    metrics: config.metrics ? new OTLPMetricExporter(options("/v1/metrics")) : undefined,
  };
}

/**
 * `OTEL_TRACES_SAMPLER` (and `OTEL_TRACES_SAMPLER_ARG`) as the SDK's specification reads them; none
 * said: every trace (the SDK's default, parent-based always-on).
 */
async function samplerFrom(env: NodeJS.ProcessEnv): Promise<{ sampler?: Sampler }> {
  const name = env.OTEL_TRACES_SAMPLER?.trim().toLowerCase();
  if (!name) return {};
  const sdk = await import("@opentelemetry/sdk-trace");
  const arg = Number(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = () =>
    new sdk.TraceIdRatioBasedSampler(Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1);
  const samplers: Record<string, () => Sampler> = {
    always_on: () => new sdk.AlwaysOnSampler(),
    always_off: () => new sdk.AlwaysOffSampler(),
    traceidratio: ratio,
    parentbased_always_on: () => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() }),
    parentbased_always_off: () => new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() }),
    parentbased_traceidratio: () => new sdk.ParentBasedSampler({ root: ratio() }),
  };
  const make = samplers[name];
  return make ? { sampler: make() } : {};
}
