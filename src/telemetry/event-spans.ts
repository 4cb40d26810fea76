import { type Attributes, TraceFlags } from "@opentelemetry/api";
import { type AgentEvent, isAgentEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import { AgentTrace } from "./agent-trace.js";
import type { SpanSink } from "./open-span.js";
import { agentAttributes } from "./span-attributes.js";
import { formatTraceparent, parseTraceparent, spanIdOf, traceIdOf } from "./span-ids.js";

export type { SpanSink } from "./open-span.js";

/**
 * Turns agents' events into spans, as the GenAI semantic conventions name them: `invoke_workflow`
 * for a run (its lead's lifetime), `invoke_agent` per agent (a subagent under the `execute_tool` span
 * of the call that spawned it), `chat` per model call, `execute_tool` per tool call with its
 * approval's wait under it, compactions and resumes beside them. The same events make the same spans
 * wherever they are read: live, by the process that hosts the agent, and later from the log
 * (`troupe export-trace`). Each agent's spans are its `AgentTrace`'s.
 */
export class EventSpans {
  readonly #agents = new Map<string, AgentTrace>();
  /** Subagents' spawning calls, from `subagent.spawned` (for runs whose events carry no trace context). */
  readonly #spawnedBy = new Map<string, string>();
  /** The subagents each agent spawned (keys of `#spawnedBy`): forgotten with it. */
  readonly #children = new Map<string, string[]>();
  #replaying = false;

  constructor(private readonly sink: SpanSink) {}

  /** One event of an agent, in its order. */
  take(envelope: Envelope): void {
    if (!isAgentEvent(envelope)) return;
    if (envelope.type === "agent.started") this.#started(envelope as AgentEvent<"agent.started">);
    const agent = this.#agents.get(keyOf(envelope.runId, envelope.agentId));
    if (!agent) return;
    if (!agent.open) agent.openStretch(envelope.ts);
    agent.on(envelope as AgentEvent);
    agent.lastAt = Math.max(agent.lastAt, envelope.ts);
  }

  /**
   * An agent's earlier events, read back from the log before this process goes on with it: what was
   * open then is open again (with the same ids), and nothing they end is made again.
   */
  replay(events: Iterable<Envelope>): void {
    this.#replaying = true;
    try {
      for (const event of events) this.take(event);
    } finally {
      this.#replaying = false;
    }
  }

  /** This process goes on with an agent another left (`AgentTrace.resumed`); `here`: it says so itself too. */
  resumed(runId: string, agentId: string, at: number, attributes: Attributes = {}, here = false): void {
    this.#agents.get(keyOf(runId, agentId))?.resumed(at, attributes, here);
  }

  /** Another process hosts the agent now: what is open of it here is left to that one. */
  forget(runId: string, agentId: string): void {
    const key = keyOf(runId, agentId);
    this.#agents.delete(key);
    for (const child of this.#children.get(key) ?? []) this.#spawnedBy.delete(child);
    this.#children.delete(key);
  }

  /** The context a subagent spawned by call `callId` starts in: that call's span. */
  traceparentFor(runId: string, agentId: string, callId: string): string | undefined {
    const context = this.#agents.get(keyOf(runId, agentId))?.contextOfCall(callId);
    return context ? formatTraceparent(context) : undefined;
  }

  /** The agents with spans open (runs read up to now, still going): each ends where its events do. */
  endAll(): void {
    for (const agent of [...this.#agents.values()].reverse()) agent.close(agent.lastAt, "still running");
    this.#agents.clear();
  }

  /**
   * An agent's first event: its trace is the one its envelope's `trace` names (its parent's call,
   * the caller of a run), else its run's own; a lead's trace is recorded as the sampler says.
   */
  #started(event: AgentEvent<"agent.started">): void {
    const { runId, agentId, data } = event;
    const given = parseTraceparent(event.trace);
    // A subagent whose start names no context is in its parent's trace, when its parent is read here.
    const parent =
      data.parentId === undefined ? undefined : this.#agents.get(keyOf(runId, data.parentId))?.place;
    const traceId = given?.traceId ?? parent?.traceId ?? traceIdOf(runId);
    const lead = data.parentId === undefined;
    let flags: number = given?.traceFlags ?? parent?.flags ?? TraceFlags.SAMPLED;
    if (lead && !given && !this.sink.sampled(traceId, `invoke_workflow ${data.name}`))
      flags = TraceFlags.NONE;
    // A subagent whose start names no context is under its parent's call, when the parent's events
    // said which; else under its parent's span.
    const spawnedBy = this.#spawnedBy.get(keyOf(runId, agentId));
    const parentId = data.parentId ?? "";
    const fromParent = {
      traceId,
      spanId: spanIdOf(runId, parentId, spawnedBy === undefined ? "agent" : "tool", spawnedBy ?? "0"),
      traceFlags: flags,
      isRemote: true,
    };
    const place = {
      runId,
      agentId,
      name: data.name,
      model: data.model,
      traceId,
      flags,
      above: lead ? given : (given ?? fromParent),
      lead,
      attributes: agentAttributes(event),
    };
    const children: string[] = [];
    this.#children.set(keyOf(runId, agentId), children);
    const spawned = (childId: string, callId: string) => {
      children.push(keyOf(runId, childId));
      this.#spawnedBy.set(keyOf(runId, childId), callId);
    };
    const trace = new AgentTrace(place, this.sink, () => this.#replaying, spawned, event.ts, data.task);
    this.#agents.set(keyOf(runId, agentId), trace);
  }
}

const keyOf = (runId: string, agentId: string) => `${runId}\u0000${agentId}`;
