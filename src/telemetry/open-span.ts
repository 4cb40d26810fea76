import {
  type Attributes,
  type Link,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { ChosenIds } from "./span-ids.js";

/** What spans are made with. */
export interface SpanSink {
  tracer: Tracer;
  /** The tracer's id generator, when Troupe chooses its ids (see span-ids.ts). */
  ids: ChosenIds | undefined;
  /** Prompts, completions, tool arguments and results on the spans (as the events hold them: redacted). */
  captureContent: boolean;
  /** The provider a model of the config is served by (`gen_ai.provider.name`). */
  providerOf(model: string): string | undefined;
  /** Whether a trace begun here is recorded (the sampler's say, asked once per run). */
  sampled(traceId: string, name: string): boolean;
}

/**
 * A span not yet made. Troupe makes the SDK's span, starts and ends it at once, when the span ends:
 * until then it is this plain record (a few hundred bytes, nothing held by the SDK), which a process
 * that goes on with an agent can make again from the agent's events.
 */
export interface OpenSpan {
  name: string;
  id: string;
  /** Undefined for a trace's root. */
  parent: SpanContext | undefined;
  start: number;
  attributes: Attributes;
  events: Array<{ name: string; time: number; attributes: Attributes }>;
  links: Link[];
}

/** Makes `open` as the span it was, ended at `at` (an error's status when `error` says one). */
export function makeSpan(sink: SpanSink, traceId: string, open: OpenSpan, at: number, error?: string): void {
  const { tracer, ids } = sink;
  const parent = open.parent ? trace.setSpanContext(ROOT_CONTEXT, open.parent) : ROOT_CONTEXT;
  const options = {
    kind: SpanKind.INTERNAL,
    startTime: open.start,
    attributes: open.attributes,
    links: open.links,
  };
  const start = () => tracer.startSpan(open.name, options, parent);
  const span = ids ? ids.choose(open.id, traceId, start) : start();
  for (const event of open.events) span.addEvent(event.name, event.attributes, event.time);
  if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
  span.end(Math.max(at, open.start));
}
