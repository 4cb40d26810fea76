import { createHash, randomBytes } from "node:crypto";
import { type SpanContext, TraceFlags } from "@opentelemetry/api";
import type { IdGenerator } from "@opentelemetry/sdk-trace";

/*
 * Troupe's spans are made from its events, by whichever process hosts the agent when a span ends: a
 * worker, the daemon, or the daemon that resumed the agent after a crash. Their ids are therefore
 * derived from what the events name (the run, the agent, the tool call), never drawn at random, so
 * a span made in one process is the parent another process names, and one left open by a process
 * that died is made whole, with the same id, by the process that goes on.
 */

const hex = (parts: readonly (string | number)[], bytes: number) =>
  createHash("sha256")
    .update(parts.join("\u0000"))
    .digest("hex")
    .slice(0, bytes * 2);

/** A run's trace when it was started in no context of its own. */
export const traceIdOf = (runId: string): string => hex(["troupe-trace", runId], 16);

/** The span of `what` (`agent`, `tool`, `chat`, …) of one agent, keyed by what tells it apart. */
export const spanIdOf = (runId: string, agentId: string, what: string, key: string | number): string =>
  hex(["troupe-span", runId, agentId, what, key], 8);

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C `traceparent` (version 00) as a span context, or undefined when it is none. */
export function parseTraceparent(value: string | undefined): SpanContext | undefined {
  const match = value === undefined ? null : TRACEPARENT.exec(value);
  if (!match) return undefined;
  const [, traceId, spanId, flags] = match as unknown as [string, string, string, string];
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
}

export function formatTraceparent(context: SpanContext): string {
  const flags = (context.traceFlags & TraceFlags.SAMPLED).toString(16).padStart(2, "0");
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/**
 * The SDK's id generator, with the ids of the next span chosen: `choose` starts a span (through the
 * tracer that uses this generator) with the ids given; any other span gets random ones. The tracer
 * asks for the span id first, then, for a root, the trace id.
 */
export class ChosenIds implements IdGenerator {
  #spanId: string | undefined;
  #traceId: string | undefined;

  constructor(private readonly fallback?: IdGenerator) {}

  choose<T>(spanId: string, traceId: string, start: () => T): T {
    this.#spanId = spanId;
    this.#traceId = traceId;
    try {
      return start();
    } finally {
      this.#spanId = undefined;
      this.#traceId = undefined;
    }
  }

  generateSpanId(): string {
    return this.#spanId ?? this.fallback?.generateSpanId() ?? randomBytes(8).toString("hex");
  }

  generateTraceId(): string {
    return this.#traceId ?? this.fallback?.generateTraceId() ?? randomBytes(16).toString("hex");
  }
}

/**
 * Has `tracer` (one of the OpenTelemetry SDK's) take its ids from a `ChosenIds`: how an application's
 * own provider makes Troupe's spans with the ids Troupe derives. Undefined for a tracer of another
 * kind, whose spans keep ids of their own.
 */
export function chooseIdsOf(tracer: object): ChosenIds | undefined {
  const sdk = tracer as { _idGenerator?: IdGenerator };
  if (typeof sdk._idGenerator?.generateSpanId !== "function") return undefined;
  const ids = new ChosenIds(sdk._idGenerator);
  sdk._idGenerator = ids;
  return ids;
}
