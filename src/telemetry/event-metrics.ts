import type { Attributes, Counter, Histogram, Meter, UpDownCounter } from "@opentelemetry/api";
import { type AgentEvent, isAgentEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import { ATTR } from "./span-attributes.js";

/** Seconds, as the GenAI conventions measure durations. */
const seconds = (ms: number) => ms / 1000;

/** Buckets for token counts (the GenAI conventions' advice) and for durations in seconds. */
const TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304];
const SECOND_BUCKETS = [
  0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

interface Timing {
  name: string;
  model: string;
  chatAt?: number;
  approvals: Map<string, number>;
}

/**
 * The metrics of the agents a process hosts, from their events as they are published: the GenAI
 * conventions' `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`, and Troupe's own
 * (cost, tool calls by outcome, approvals by decision and their wait, agents active here, and how long
 * the event log took to take an event).
 */
export class EventMetrics {
  readonly #tokens: Histogram;
  readonly #duration: Histogram;
  readonly #cost: Counter;
  readonly #toolCalls: Counter;
  readonly #approvals: Counter;
  readonly #approvalWait: Histogram;
  readonly #active: UpDownCounter;
  readonly #logLag: Histogram;
  readonly #agents = new Map<string, Timing>();

  constructor(
    meter: Meter,
    private readonly providerOf: (model: string) => string | undefined,
    private readonly host: Attributes,
  ) {
    this.#tokens = meter.createHistogram("gen_ai.client.token.usage", {
      unit: "{token}",
      description: "Tokens used by a model call, by type (input, output)",
      advice: { explicitBucketBoundaries: TOKEN_BUCKETS },
    });
    this.#duration = meter.createHistogram("gen_ai.client.operation.duration", {
      unit: "s",
      description: "How long a model call took",
      advice: { explicitBucketBoundaries: SECOND_BUCKETS },
    });
    this.#cost = meter.createCounter("troupe.cost", {
      unit: "USD",
      description: "What model calls cost, by agent and model",
    });
    this.#toolCalls = meter.createCounter("troupe.tool.calls", {
      unit: "{call}",
      description: "Tool calls, by outcome",
    });
    this.#approvals = meter.createCounter("troupe.approvals", {
      unit: "{approval}",
      description: "Approvals, by decision",
    });
    this.#approvalWait = meter.createHistogram("troupe.approval.wait", {
      unit: "s",
      description: "How long a call waited for its approval",
      advice: { explicitBucketBoundaries: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600] },
    });
    this.#active = meter.createUpDownCounter("troupe.agents.active", {
      unit: "{agent}",
      description: "Agents hosted by this process",
    });
    this.#logLag = meter.createHistogram("troupe.event_log.lag", {
      unit: "s",
      description: "From an event's making to the event log's acknowledgement of it",
      advice: { explicitBucketBoundaries: SECOND_BUCKETS },
    });
  }

  /** An agent this process hosts from now on (started, or resumed here): its name and model. */
  hosting(runId: string, agentId: string, name: string, model: string): void {
    const key = `${runId}\u0000${agentId}`;
    if (this.#agents.has(key)) return;
    this.#agents.set(key, { name, model, approvals: new Map() });
    this.#active.add(1, this.host);
  }

  /** An agent this process no longer hosts (it stopped, or another host took it). */
  released(runId: string, agentId: string): void {
    if (this.#agents.delete(`${runId}\u0000${agentId}`)) this.#active.add(-1, this.host);
  }

  /** The event log took events made at `madeAt` (ms since the epoch) `at` (now). */
  appended(madeAt: number, at: number = Date.now()): void {
    this.#logLag.record(seconds(Math.max(0, at - madeAt)), this.host);
  }

  take(envelope: Envelope): void {
    if (!isAgentEvent(envelope)) return;
    const event = envelope as AgentEvent;
    if (event.type === "agent.started")
      this.hosting(event.runId, event.agentId, event.data.name, event.data.model);
    const timing = this.#agents.get(`${event.runId}\u0000${event.agentId}`);
    if (!timing) return;
    switch (event.type) {
      case "state.changed":
        if (event.data.to === "callingModel") timing.chatAt = event.ts;
        return;
      case "model.completed": {
        const provider = this.providerOf(timing.model);
        const attributes: Attributes = {
          [ATTR.operation]: "chat",
          [ATTR.requestModel]: timing.model,
          [ATTR.responseModel]: event.data.model,
          ...(provider ? { [ATTR.provider]: provider } : {}),
        };
        const { usage } = event.data;
        this.#tokens.record(usage.inputTokens, { ...attributes, [ATTR.tokenType]: "input" });
        this.#tokens.record(usage.outputTokens, { ...attributes, [ATTR.tokenType]: "output" });
        if (timing.chatAt !== undefined) this.#duration.record(seconds(event.ts - timing.chatAt), attributes);
        timing.chatAt = undefined;
        if (usage.costUsd > 0)
          this.#cost.add(usage.costUsd, {
            [ATTR.agentName]: timing.name,
            [ATTR.requestModel]: event.data.model,
          });
        return;
      }
      case "tool.requested":
        if (event.data.decision === "deny")
          this.#toolCalls.add(1, { [ATTR.toolName]: event.data.name, "troupe.outcome": "denied" });
        return;
      case "tool.finished":
        this.#toolCalls.add(1, {
          [ATTR.toolName]: event.data.name,
          "troupe.outcome": event.data.ok ? "ok" : "error",
        });
        return;
      case "approval.requested":
        timing.approvals.set(event.data.callId, event.ts);
        return;
      case "approval.decided":
      case "approval.closed": {
        const decision =
          event.type === "approval.closed" ? "closed" : event.data.approved ? "approved" : "denied";
        const by = event.type === "approval.decided" ? event.data.by : "none";
        this.#approvals.add(1, { "troupe.approval.decision": decision, "troupe.approval.by": by });
        const asked = timing.approvals.get(event.data.callId);
        timing.approvals.delete(event.data.callId);
        if (asked !== undefined)
          this.#approvalWait.record(seconds(event.ts - asked), { "troupe.approval.decision": decision });
        return;
      }
      case "agent.stopped":
        this.released(event.runId, event.agentId);
        return;
      default:
        return;
    }
  }
}
