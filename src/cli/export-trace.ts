import { closeSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { resolve } from "node:path";
import { type ConfigChoice, type LoadedConfig, loadConfig } from "../config/load.js";
import type { TelemetryConfig } from "../config/telemetry-schema.js";
import { UserError } from "../errors.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { ModelRouter } from "../model/model-router.js";
import { otlpJson, sendSpans, spansOfRun } from "../telemetry/export-run.js";
import { visible } from "../util/visible.js";
import { connectClient } from "./client.js";
import { eventStreamOf, HistoryError, storeOf } from "./history.js";

export class TraceExportError extends UserError {
  override name = "TraceExportError";
}

export interface ExportTraceFlags {
  /** An OTLP endpoint's base URL; default troupe.yaml's `telemetry.endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  endpoint?: string;
  protocol?: TelemetryConfig["protocol"];
  /** Write OTLP/JSON here instead of sending. */
  file?: string;
  /** Put prompts, completions and tool output on the spans (as the events hold them: redacted). */
  content?: boolean;
}

/**
 * `troupe export-trace RUN`: a stored run (local, or the daemon's) as OpenTelemetry spans, made from
 * its events as live telemetry makes them, sent to an OTLP endpoint or written as OTLP/JSON.
 */
export async function runExportTrace(
  where: ConfigChoice,
  runId: string,
  flags: ExportTraceFlags,
  log: Logger,
): Promise<number> {
  if (flags.file !== undefined && flags.endpoint !== undefined)
    throw new TraceExportError("export-trace: give --file or --endpoint, not both");
  if (flags.endpoint !== undefined && !/^https?:\/\/\S+$/.test(flags.endpoint))
    throw new TraceExportError(
      `export-trace: --endpoint ${visible(flags.endpoint)} is no http:// or https:// URL`,
    );
  const config = loadConfig(where);
  const telemetry = {
    ...config.troupe.telemetry,
    captureContent: flags.content ?? config.troupe.telemetry.captureContent,
  };
  const spans = await withEvents(config, runId, log, (events) =>
    spansOfRun(events, telemetry, providersOf(config)),
  );
  if (spans.length === 0)
    throw new HistoryError(`no run ${visible(runId)} here or on the daemon; troupe runs lists them`);
  if (flags.file !== undefined) {
    const path = resolve(flags.file);
    writeWhole(path, await otlpJson(spans));
    process.stderr.write(`wrote ${spans.length} spans of run ${visible(runId)} to ${visible(path)}\n`);
    return 0;
  }
  const target = {
    ...(flags.endpoint ? { endpoint: flags.endpoint } : {}),
    ...(flags.protocol ? { protocol: flags.protocol } : {}),
  };
  const to =
    flags.endpoint ??
    telemetry.endpoint ??
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT ??
    "the OTLP default endpoint";
  try {
    await sendSpans(spans, telemetry, process.env, target);
  } catch (error) {
    throw new TraceExportError(
      `could not send the spans of run ${visible(runId)} to ${visible(to)}: ${visible((error as Error).message)}; is a collector listening there?`,
    );
  }
  process.stderr.write(`sent ${spans.length} spans of run ${visible(runId)} to ${visible(to)}\n`);
  return 0;
}

/** The run's events from the data dir (a local run) or the daemon's log, given to `use` as they are read. */
async function withEvents<T>(
  config: LoadedConfig,
  runId: string,
  log: Logger,
  use: (events: Iterable<Envelope> | AsyncIterable<Envelope>) => Promise<T>,
): Promise<T> {
  const local = eventStreamOf(storeOf(config), runId, log);
  if (local) return use(local);
  const bus = await connectClient(config, "troupe-export-trace", log);
  try {
    return await use(
      (async function* () {
        for await (const { envelope } of bus.eventLog.read({ runId })) yield envelope;
      })(),
    );
  } finally {
    await bus.close();
  }
}

function providersOf(config: LoadedConfig): (model: string) => string | undefined {
  const models = new ModelRouter(config.troupe);
  return (model) => {
    try {
      return models.resolve(model).provider;
    } catch {
      return undefined;
    }
  };
}

/** Writes `path` whole or not at all (a temporary file beside it, then a rename), readable by its owner only. */
function writeWhole(path: string, bytes: Uint8Array): void {
  const temp = `${path}.${process.pid}.tmp`;
  try {
    const fd = openSync(temp, "wx", 0o600);
    try {
      writeSync(fd, bytes);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  } catch (error) {
    rmSync(temp, { force: true });
    throw new TraceExportError(
      `could not write ${visible(path)}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}
