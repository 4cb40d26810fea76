import {
  type Attributes,
  type MeterProvider,
  ROOT_CONTEXT,
  SpanKind,
  type TracerProvider,
} from "@opentelemetry/api";
import type { Envelope } from "../events/envelope.js";
import { EventMetrics } from "./event-metrics.js";
import { EventSpans } from "./event-spans.js";
import { chooseIdsOf } from "./span-ids.js";

/** The scope Troupe's spans and metrics are made under. */
export const SCOPE = "troupe";

export interface TelemetryParts {
  tracerProvider: TracerProvider;
  /** No metrics without one. */
  meterProvider?: MeterProvider | undefined;
  captureContent?: boolean | undefined;
  /** The provider a model of the config is served by. */
  providerOf?: ((model: string) => string | undefined) | undefined;
  /** What this process is (`host.name`, `process.pid`, `troupe.role`): on the resume spans and the metrics. */
  host?: Attributes | undefined;
  /** Flushes and stops what was made for this telemetry (the SDK's providers Troupe made itself). */
  shutdown?: (() => Promise<void>) | undefined;
  /** Told, once, when making a span or a metric threw: telemetry never stops an agent. */
  failed?: ((error: unknown) => void) | undefined;
}

/**
 * A process's telemetry: the spans and metrics of the agents it hosts, made from their events as
 * they are published (`take`), each span when it ends. Off, a process has none (`undefined`), and
 * nothing of this is loaded or run.
 */
export class Telemetry {
  readonly #spans: EventSpans;
  readonly #metrics: EventMetrics | undefined;
  readonly #host: Attributes;
  readonly #shutdown: (() => Promise<void>) | undefined;
  #failed: ((error: unknown) => void) | undefined;
  /** Resumed agents whose history is still being read: their new events, in order. */
  readonly #waiting = new Map<string, Envelope[]>();

  constructor(parts: TelemetryParts) {
    const providerOf = parts.providerOf ?? (() => undefined);
    const tracer = parts.tracerProvider.getTracer(SCOPE);
    this.#host = parts.host ?? {};
    this.#spans = new EventSpans({
      tracer,
      ids: chooseIdsOf(tracer),
      captureContent: parts.captureContent ?? false,
      providerOf,
      sampled: samplerOf(parts.tracerProvider),
    });
    this.#metrics = parts.meterProvider
      ? new EventMetrics(parts.meterProvider.getMeter(SCOPE), providerOf, this.#host)
      : undefined;
    this.#shutdown = parts.shutdown;
    this.#failed = parts.failed;
  }

  /** An event of an agent this process hosts, as it is published (redacted). */
  take(envelope: Envelope): void {
    const waiting = this.#waiting.get(`${envelope.runId}\u0000${envelope.agentId}`);
    if (waiting) {
      waiting.push(envelope);
      return;
    }
    try {
      this.#spans.take(envelope);
      this.#metrics?.take(envelope);
    } catch (error) {
      this.#failedOnce(error);
    }
    // Its spans are all made: nothing of it is kept. Reopened (a follow-up), it is resumed from its
    // events, as after a crash.
    if (envelope.type === "agent.stopped") this.#spans.forget(envelope.runId, envelope.agentId);
  }

  /** The event log took events made at `madeAt`. */
  appended(madeAt: number): void {
    try {
      this.#metrics?.appended(madeAt);
    } catch (error) {
      this.#failedOnce(error);
    }
  }

  #failedOnce(error: unknown): void {
    const failed = this.#failed;
    this.#failed = undefined;
    failed?.(error);
  }

  /**
   * This process goes on with an agent from its stored state (after a crash, a takeover, or to
   * reopen it): `history` is its events so far, from the log. What was open then is open again here;
   * the agent's events published meanwhile wait for it.
   */
  resuming(
    agent: { runId: string; agentId: string; name: string; model: string },
    history: Promise<Envelope[]>,
  ): void {
    const key = `${agent.runId}\u0000${agent.agentId}`;
    const waiting: Envelope[] = [];
    this.#waiting.set(key, waiting);
    const goOn = (events: readonly Envelope[]) => {
      this.#waiting.delete(key);
      try {
        this.#spans.replay(events);
        this.#spans.resumed(agent.runId, agent.agentId, Date.now(), this.#host, true);
        this.#metrics?.hosting(agent.runId, agent.agentId, agent.name, agent.model);
      } catch (error) {
        this.#failedOnce(error);
      }
      for (const envelope of waiting) this.take(envelope);
    };
    // Without its history (the log unread) no span of it is made here from then on; its events are
    // in the log, for `troupe export-trace`.
    history.then(goOn, (error: unknown) => {
      this.#failedOnce(error);
      goOn([]);
    });
  }

  /** This process no longer hosts the agent (another does): its open spans are that one's to end. */
  released(runId: string, agentId: string): void {
    this.#spans.forget(runId, agentId);
    this.#metrics?.released(runId, agentId);
  }

  /** The `traceparent` a subagent spawned by the call `callId` of this agent starts in. */
  traceparentFor(runId: string, agentId: string, callId: string): string | undefined {
    return this.#spans.traceparentFor(runId, agentId, callId);
  }

  /** Sends what is still held and stops (a process's last step). */
  async shutdown(): Promise<void> {
    await this.#shutdown?.();
  }
}

/**
 * Whether the provider's sampler records a trace begun with a trace id (its root span of a name): a
 * probe span, started with that id and never ended (so never exported), asks it.
 */
function samplerOf(provider: TracerProvider): (traceId: string, name: string) => boolean {
  const tracer = provider.getTracer(`${SCOPE}.sampling`);
  const ids = chooseIdsOf(tracer);
  return (traceId, name) =>
    ids === undefined ||
    ids
      .choose("0000000000000001", traceId, () =>
        tracer.startSpan(name, { kind: SpanKind.INTERNAL }, ROOT_CONTEXT),
      )
      .isRecording();
}
