import {
  type Attributes,
  type Link,
  ROOT_CONTEXT,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { type AgentEvent, type AgentEventMap, isAgentEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import { ATTR, agentAttributes, chatAttributes, stopAttributes } from "./span-attributes.js";
import { type ChosenIds, formatTraceparent, parseTraceparent, spanIdOf, traceIdOf } from "./span-ids.js";

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

/** A span not yet made: the SDK's span is made, started and ended at once when it ends. */
interface OpenSpan {
  name: string;
  id: string;
  /** Undefined for a trace's root. */
  parent: SpanContext | undefined;
  start: number;
  kind: SpanKind;
  attributes: Attributes;
  events: Array<{ name: string; time: number; attributes: Attributes }>;
  links: Link[];
}

interface ToolSpan {
  span: OpenSpan;
  approval?: OpenSpan;
  started: boolean;
  /** Why it may not run, when the policy said so as it was asked for. */
  refused?: string;
}

/** What is open of one agent. */
interface AgentSpans {
  runId: string;
  agentId: string;
  name: string;
  model: string;
  traceId: string;
  flags: number;
  /** The context its `invoke_agent` (a lead's `invoke_workflow`) is in; none for a run begun in none. */
  above: SpanContext | undefined;
  lead: boolean;
  attributes: Attributes;
  /** It was resumed by this process, whose `agent.resumed`, if it sends one, is not another resume. */
  resumedHere?: boolean;
  /** How many times it stopped: a reopened agent's next stretch is a span of its own. */
  stretch: number;
  workflow?: OpenSpan;
  agent?: OpenSpan;
  resume?: OpenSpan;
  chat?: {
    span: OpenSpan;
    completed?: { at: number; data: AgentEventMap["model.completed"] };
    calls: Attributes[];
  };
  chats: number;
  tools: Map<string, ToolSpan>;
  compaction?: OpenSpan;
  /** What the next model call is given that the last was not (captured content only). */
  input: unknown[];
  text: string;
  lastAt: number;
}

/**
 * Turns an agent's events into spans, as the GenAI semantic conventions name them: `invoke_workflow`
 * for a run (its lead's lifetime), `invoke_agent` per agent (a subagent under the `execute_tool` span
 * of the call that spawned it), `chat` per model call, `execute_tool` per tool call with its
 * approval's wait under it, compactions and resumes beside them. The same events make the same spans
 * wherever they are read: live, by the process that hosts the agent, and later from the log
 * (`troupe export-trace`).
 */
export class EventSpans {
  readonly #agents = new Map<string, AgentSpans>();
  /** Subagents' spawning calls, from `subagent.spawned` (for runs whose events carry no trace context). */
  readonly #spawnedBy = new Map<string, string>();
  #replaying = false;

  constructor(private readonly sink: SpanSink) {}

  /** One event of an agent, in its order. */
  take(envelope: Envelope): void {
    if (!isAgentEvent(envelope)) return;
    const key = keyOf(envelope.runId, envelope.agentId);
    if (envelope.type === "agent.started") this.#started(envelope as AgentEvent<"agent.started">);
    const agent = this.#agents.get(key);
    if (!agent) return;
    if (!agent.agent) this.#openStretch(agent, envelope.ts);
    this.#on(agent, envelope as AgentEvent);
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

  /**
   * This process goes on with an agent another left (a crash, a takeover): a model call that was
   * under way ends as cut off where the agent's events stopped, and the spans from here on are under
   * a `resume_agent` span linked to it.
   */
  resumed(runId: string, agentId: string, at: number, attributes: Attributes = {}, here = false): void {
    const agent = this.#agents.get(keyOf(runId, agentId));
    if (!agent?.agent) return;
    // This process resumed it, and says so in its `agent.resumed` too: one resume, not two.
    if (agent.resumedHere && agent.resume) {
      agent.resumedHere = false;
      Object.assign(agent.resume.attributes, attributes);
      return;
    }
    agent.resumedHere = here;
    // Linked to what it goes on from: the model call cut off, or the calls it goes on waiting for.
    const links: Link[] = [...agent.tools.values()].map((tool) => ({
      context: this.#contextOf(agent, tool.span),
    }));
    const cut = agent.chat?.span;
    if (cut) {
      links.push({ context: this.#contextOf(agent, cut) });
      this.#end(agent, cut, agent.lastAt, { error: "cut off: its host went away" });
      agent.chat = undefined;
    }
    if (agent.compaction) {
      this.#end(agent, agent.compaction, agent.lastAt, { error: "cut off: its host went away" });
      agent.compaction = undefined;
    }
    if (agent.resume) this.#end(agent, agent.resume, agent.lastAt, { error: "its host went away" });
    agent.resume = this.#open(agent, `resume_agent ${agent.name}`, ["resume", agent.stretch, at], at, {
      [ATTR.operation]: "resume_agent",
      [ATTR.agentName]: agent.name,
      [ATTR.agentId]: agent.agentId,
      ...attributes,
    });
    agent.resume.links = links;
    agent.resume.parent = this.#contextOf(agent, agent.agent);
  }

  /** Another process hosts the agent now: what is open of it here is left to that one. */
  forget(runId: string, agentId: string): void {
    this.#agents.delete(keyOf(runId, agentId));
  }

  /** The context a subagent spawned by call `callId` starts in: that call's span. */
  traceparentFor(runId: string, agentId: string, callId: string): string | undefined {
    const agent = this.#agents.get(keyOf(runId, agentId));
    const tool = agent?.tools.get(callId);
    return agent && tool ? formatTraceparent(this.#contextOf(agent, tool.span)) : undefined;
  }

  /** The agents with spans open (runs read up to now, still going): each ends where its events do. */
  endAll(): void {
    for (const agent of [...this.#agents.values()].reverse())
      this.#close(agent, agent.lastAt, "still running");
    this.#agents.clear();
  }

  #started(event: AgentEvent<"agent.started">): void {
    const { runId, agentId, data } = event;
    const given = parseTraceparent(event.trace);
    const traceId = given?.traceId ?? traceIdOf(runId);
    const lead = data.parentId === undefined;
    const spawnedBy = this.#spawnedBy.get(keyOf(runId, agentId));
    let flags: number = given?.traceFlags ?? TraceFlags.SAMPLED;
    if (lead && !given && !this.sink.sampled(traceId, `invoke_workflow ${data.name}`))
      flags = TraceFlags.NONE;
    const parentId = data.parentId ?? "";
    const agent: AgentSpans = {
      runId,
      agentId,
      name: data.name,
      model: data.model,
      traceId,
      flags,
      // A lead's span is under its run's; a subagent's under its parent's call (or, not knowing
      // which, its parent's span).
      above: lead
        ? given
        : (given ?? {
            traceId,
            spanId: spanIdOf(runId, parentId, spawnedBy === undefined ? "agent" : "tool", spawnedBy ?? "0"),
            traceFlags: flags,
            isRemote: true,
          }),
      lead,
      attributes: agentAttributes(event),
      stretch: 0,
      chats: 0,
      tools: new Map(),
      input: [],
      text: "",
      lastAt: event.ts,
    };
    this.#agents.set(keyOf(runId, agentId), agent);
    this.#openStretch(agent, event.ts);
    if (this.sink.captureContent)
      agent.input.push({ role: "user", parts: [{ type: "text", content: data.task }] });
  }

  /**
   * The spans of the agent's life from its start, or from its reopening after it stopped (a follow-up,
   * a compaction asked for): `invoke_agent`, and a lead's `invoke_workflow` above it.
   */
  #openStretch(agent: AgentSpans, at: number): void {
    const { name } = agent;
    let parent = agent.above;
    if (agent.lead) {
      agent.workflow = this.#open(agent, `invoke_workflow ${name}`, ["workflow", agent.stretch], at, {
        [ATTR.operation]: "invoke_workflow",
        [ATTR.workflowName]: name,
        [ATTR.runId]: agent.runId,
      });
      agent.workflow.parent = agent.above;
      parent = this.#contextOf(agent, agent.workflow);
    }
    agent.agent = this.#open(agent, `invoke_agent ${name}`, ["agent", agent.stretch], at, {
      ...agent.attributes,
    });
    agent.agent.parent = parent;
  }

  #on(agent: AgentSpans, event: AgentEvent): void {
    if (agent.chat?.completed && event.type !== "tool.requested") this.#endChat(agent);
    switch (event.type) {
      case "state.changed":
        if (event.data.to === "callingModel") this.#openChat(agent, event.ts);
        else if (event.data.to === "compacting")
          agent.compaction ??= this.#open(agent, "compact_context", ["compact", event.seq], event.ts, {
            [ATTR.operation]: "compact_context",
          });
        return;
      case "output.retried":
        this.#openChat(agent, event.ts);
        return;
      case "model.delta":
        if (this.sink.captureContent && agent.chat) agent.text += event.data.text;
        return;
      case "model.retrying":
        agent.chat?.span.events.push({
          name: "gen_ai.client.retry",
          time: event.ts,
          attributes: {
            [ATTR.requestModel]: event.data.model,
            "troupe.retry.attempt": event.data.attempt,
            "troupe.retry.delay_ms": event.data.delayMs,
            "error.type": event.data.error,
          },
        });
        return;
      case "model.completed":
        if (!agent.chat) this.#openChat(agent, agent.lastAt);
        (agent.chat as NonNullable<AgentSpans["chat"]>).completed = { at: event.ts, data: event.data };
        return;
      case "tool.requested":
        this.#toolRequested(agent, event);
        return;
      case "approval.requested":
      case "approval.decided":
      case "approval.closed":
        this.#approval(agent, event);
        return;
      case "tool.started": {
        const tool = agent.tools.get(event.data.callId);
        if (tool) tool.started = true;
        return;
      }
      case "tool.progress":
      case "sampling.finished":
      case "elicitation.finished":
        this.#toolNote(agent, event);
        return;
      case "subagent.spawned":
        this.#spawned(agent, event);
        return;
      case "tool.finished":
        this.#toolFinished(agent, event);
        return;
      case "context.compacted":
        this.#compacted(agent, event);
        return;
      case "agent.resumed":
        this.resumed(agent.runId, agent.agentId, event.ts, { "troupe.resume.state": event.data.state });
        return;
      case "agent.stopped":
        this.#close(agent, event.ts, undefined, event.data);
        return;
      default:
        return;
    }
  }

  #openChat(agent: AgentSpans, at: number): void {
    if (agent.chat) this.#endChat(agent);
    this.#endUnstarted(agent, at);
    const model = agent.model;
    const provider = this.sink.providerOf(model);
    agent.chat = {
      span: this.#open(agent, `chat ${model}`, ["chat", agent.stretch, agent.chats++], at, {
        [ATTR.operation]: "chat",
        [ATTR.requestModel]: model,
        ...(provider ? { [ATTR.provider]: provider } : {}),
      }),
      calls: [],
    };
    agent.text = "";
  }

  #endChat(agent: AgentSpans): void {
    const chat = agent.chat;
    if (!chat) return;
    agent.chat = undefined;
    const completed = chat.completed;
    if (!completed) {
      this.#end(agent, chat.span, agent.lastAt, { error: "the model call did not finish" });
      return;
    }
    Object.assign(chat.span.attributes, chatAttributes(completed.data, agent.model));
    if (completed.data.model !== agent.model)
      chat.span.events.push({
        name: "troupe.model.fallback",
        time: completed.at,
        attributes: { [ATTR.responseModel]: completed.data.model },
      });
    if (this.sink.captureContent) {
      chat.span.attributes[ATTR.inputMessages] = JSON.stringify(agent.input);
      chat.span.attributes[ATTR.outputMessages] = JSON.stringify([
        {
          role: "assistant",
          parts: [...(agent.text ? [{ type: "text", content: agent.text }] : []), ...chat.calls],
          finish_reason: completed.data.finishReason,
        },
      ]);
      agent.input = [];
    }
    this.#end(
      agent,
      chat.span,
      completed.at,
      completed.data.finishReason === "error" ? { error: "the model said the generation failed" } : {},
    );
  }

  #toolRequested(agent: AgentSpans, event: AgentEvent<"tool.requested">): void {
    const { callId, name, arguments: args, effect, decision } = event.data;
    if (this.sink.captureContent)
      agent.chat?.calls.push({ type: "tool_call", id: callId, name, arguments: args });
    const span = this.#open(agent, `execute_tool ${name}`, ["tool", callId], event.ts, {
      [ATTR.operation]: "execute_tool",
      [ATTR.toolName]: name,
      [ATTR.toolCallId]: callId,
      [ATTR.toolType]: name.includes("__") ? "extension" : "function",
      "troupe.tool.effect": effect,
      "troupe.tool.decision": decision,
      ...(this.sink.captureContent ? { [ATTR.toolArguments]: args } : {}),
    });
    span.parent = this.#contextOf(agent, agent.resume ?? (agent.agent as OpenSpan));
    agent.tools.set(callId, {
      span,
      started: false,
      ...(event.data.error ? { refused: event.data.error } : {}),
    });
  }

  /** Calls of the last turn that never started (denied, by the policy or a person) end when the next turn begins. */
  #endUnstarted(agent: AgentSpans, at: number): void {
    for (const [callId, tool] of agent.tools) {
      if (tool.started) continue;
      agent.tools.delete(callId);
      if (tool.approval) this.#end(agent, tool.approval, at, {});
      this.#end(agent, tool.span, at, { error: tool.refused ?? "not run" });
    }
  }

  #approval(
    agent: AgentSpans,
    event: AgentEvent<"approval.requested" | "approval.decided" | "approval.closed">,
  ): void {
    const tool = agent.tools.get(event.data.callId);
    if (!tool) return;
    if (event.type === "approval.requested") {
      const name = (event.data as AgentEventMap["approval.requested"]).name;
      tool.approval = this.#open(agent, `await_approval ${name}`, ["approval", event.data.callId], event.ts, {
        [ATTR.operation]: "await_approval",
        [ATTR.toolCallId]: event.data.callId,
      });
      tool.approval.parent = this.#contextOf(agent, tool.span);
      return;
    }
    const waited = tool.approval ? event.ts - tool.approval.start : 0;
    const answer =
      event.type === "approval.decided"
        ? {
            "troupe.approval.approved": (event.data as AgentEventMap["approval.decided"]).approved,
            "troupe.approval.by": (event.data as AgentEventMap["approval.decided"]).by,
          }
        : { "troupe.approval.closed": (event.data as AgentEventMap["approval.closed"]).why };
    Object.assign(tool.span.attributes, answer, { "troupe.approval.wait_ms": waited });
    if (tool.approval) {
      Object.assign(tool.approval.attributes, answer);
      this.#end(agent, tool.approval, event.ts, {});
      tool.approval = undefined;
    }
  }

  #toolNote(
    agent: AgentSpans,
    event: AgentEvent<"tool.progress" | "sampling.finished" | "elicitation.finished">,
  ): void {
    const tool = agent.tools.get(event.data.callId);
    if (!tool) return;
    const attributes: Attributes = {};
    for (const [key, value] of Object.entries(event.data))
      if (key !== "callId" && (typeof value === "string" || typeof value === "number"))
        attributes[`troupe.${key}`] = value;
    if (event.type === "sampling.finished" && event.data.usage) {
      attributes[ATTR.inputTokens] = event.data.usage.inputTokens;
      attributes[ATTR.outputTokens] = event.data.usage.outputTokens;
    }
    tool.span.events.push({ name: `troupe.${event.type}`, time: event.ts, attributes });
  }

  #spawned(agent: AgentSpans, event: AgentEvent<"subagent.spawned">): void {
    const { callId, childId } = event.data;
    if (callId === undefined) return;
    this.#spawnedBy.set(keyOf(agent.runId, childId), callId);
    const tool = agent.tools.get(callId);
    if (tool) tool.span.attributes["troupe.subagent.id"] = childId;
  }

  #toolFinished(agent: AgentSpans, event: AgentEvent<"tool.finished">): void {
    const tool = agent.tools.get(event.data.callId);
    if (!tool) return;
    agent.tools.delete(event.data.callId);
    const { ok, error, preview, durationMs } = event.data;
    tool.span.attributes["troupe.tool.ok"] = ok;
    tool.span.attributes["troupe.tool.duration_ms"] = durationMs;
    if (this.sink.captureContent && preview !== undefined) tool.span.attributes[ATTR.toolResult] = preview;
    if (this.sink.captureContent)
      agent.input.push({
        role: "tool",
        parts: [{ type: "tool_call_response", id: event.data.callId, response: preview ?? error ?? "" }],
      });
    if (tool.approval) this.#end(agent, tool.approval, event.ts, { error: "the call ended while it waited" });
    this.#end(agent, tool.span, event.ts, ok ? {} : { error: error ?? "the call failed" });
  }

  #compacted(agent: AgentSpans, event: AgentEvent<"context.compacted">): void {
    const span =
      agent.compaction ??
      this.#open(agent, "compact_context", ["compact", event.seq], event.ts, {
        [ATTR.operation]: "compact_context",
      });
    agent.compaction = undefined;
    Object.assign(span.attributes, {
      "troupe.compaction.tokens_before": event.data.tokensBefore,
      "troupe.compaction.tokens_after": event.data.tokensAfter,
      [ATTR.inputTokens]: event.data.usage.inputTokens,
      [ATTR.outputTokens]: event.data.usage.outputTokens,
    });
    this.#end(agent, span, event.ts, {});
  }

  /** Ends everything open of the agent at `at`: at its stop (`output`), or where its events end. */
  #close(
    agent: AgentSpans,
    at: number,
    unfinished: string | undefined,
    output?: AgentEventMap["agent.stopped"],
  ): void {
    if (agent.chat) this.#endChat(agent);
    const cut = { error: unfinished ?? "cut off when the agent stopped" };
    for (const tool of agent.tools.values()) {
      if (tool.approval) this.#end(agent, tool.approval, at, cut);
      this.#end(agent, tool.span, at, cut);
    }
    agent.tools.clear();
    if (agent.compaction) this.#end(agent, agent.compaction, at, cut);
    if (agent.resume) this.#end(agent, agent.resume, at, unfinished ? cut : {});
    const status = output ? (output.reason === "failed" ? { error: output.error ?? "failed" } : {}) : cut;
    if (agent.agent) {
      if (output) Object.assign(agent.agent.attributes, stopAttributes(output));
      this.#end(agent, agent.agent, at, status);
    }
    if (agent.workflow) {
      if (output) Object.assign(agent.workflow.attributes, stopAttributes(output));
      this.#end(agent, agent.workflow, at, status);
    }
    agent.agent = agent.workflow = agent.resume = agent.compaction = undefined;
    agent.stretch++;
  }

  #open(
    agent: AgentSpans,
    name: string,
    key: readonly (string | number)[],
    at: number,
    attributes: Attributes,
  ): OpenSpan {
    const parentSpan = agent.resume ?? agent.agent;
    return {
      name,
      id: spanIdOf(agent.runId, agent.agentId, String(key[0]), key.slice(1).join(".")),
      parent: parentSpan ? this.#contextOf(agent, parentSpan) : undefined,
      start: at,
      kind: SpanKind.INTERNAL,
      attributes,
      events: [],
      links: [],
    };
  }

  #contextOf(agent: AgentSpans, span: OpenSpan): SpanContext {
    return { traceId: agent.traceId, spanId: span.id, traceFlags: agent.flags, isRemote: true };
  }

  /** Makes the span, as it was, and ends it: nothing while replaying what another process made. */
  #end(agent: AgentSpans, open: OpenSpan, at: number, status: { error?: string }): void {
    if (this.#replaying) return;
    const { tracer, ids } = this.sink;
    const parent = open.parent ? trace.setSpanContext(ROOT_CONTEXT, open.parent) : ROOT_CONTEXT;
    const options = {
      kind: open.kind,
      startTime: open.start,
      attributes: open.attributes,
      links: open.links,
    };
    const start = () => tracer.startSpan(open.name, options, parent);
    const span = ids ? ids.choose(open.id, agent.traceId, start) : start();
    for (const event of open.events) span.addEvent(event.name, event.attributes, event.time);
    if (status.error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: status.error });
    span.end(Math.max(at, open.start));
  }
}

const keyOf = (runId: string, agentId: string) => `${runId}\u0000${agentId}`;
