import type { Attributes, Link, SpanContext } from "@opentelemetry/api";
import type { AgentEvent, AgentEventMap } from "../events/agent-events.js";
import { makeSpan, type OpenSpan, type SpanSink } from "./open-span.js";
import { ATTR, chatAttributes, noteAttributes, stopAttributes, toolAttributes } from "./span-attributes.js";
import { spanIdOf } from "./span-ids.js";

interface ToolSpan {
  span: OpenSpan;
  approval?: OpenSpan;
  started: boolean;
  /** Why it may not run, when the policy said so as it was asked for. */
  refused?: string;
}

interface ChatSpan {
  span: OpenSpan;
  completed?: { at: number; data: AgentEventMap["model.completed"] };
  /** The calls its answer asked for (captured content only). */
  calls: Attributes[];
}

/** Who an agent is in its trace, from its `agent.started`. */
export interface AgentPlace {
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
}

/**
 * The spans of one agent from its events: what is open of it, and what each event opens or ends. Each
 * span is made when it ends (`makeSpan`), under ids derived from the run, the agent and what the event
 * names, so the same events make the same spans wherever they are read.
 */
export class AgentTrace {
  /** It was resumed by this process, whose `agent.resumed`, if it sends one, is not another resume. */
  resumedHere = false;
  lastAt: number;
  /** How many times it stopped: a reopened agent's next stretch is a span of its own. */
  #stretch = 0;
  #workflow: OpenSpan | undefined;
  #invocation: OpenSpan | undefined;
  #resume: OpenSpan | undefined;
  #chat: ChatSpan | undefined;
  #chats = 0;
  readonly #tools = new Map<string, ToolSpan>();
  #compaction: OpenSpan | undefined;
  /** What the next model call is given that the last was not (captured content only). */
  #input: unknown[] = [];
  #text = "";

  constructor(
    readonly place: AgentPlace,
    private readonly sink: SpanSink,
    /** While the events read are another process's, replayed: nothing is made. */
    private readonly replaying: () => boolean,
    /** A subagent it spawned, and the call that did (for runs whose events carry no trace context). */
    private readonly spawned: (childId: string, callId: string) => void,
    startedAt: number,
    task: string,
  ) {
    this.lastAt = startedAt;
    this.openStretch(startedAt);
    if (sink.captureContent) this.#input.push({ role: "user", parts: [{ type: "text", content: task }] });
  }

  /** Whether it has a stretch open (it has not stopped since it started or was reopened). */
  get open(): boolean {
    return this.#invocation !== undefined;
  }

  /**
   * The spans of the agent's life from its start, or from its reopening after it stopped (a follow-up,
   * a compaction asked for): `invoke_agent`, and a lead's `invoke_workflow` above it.
   */
  openStretch(at: number): void {
    const { name, above, lead } = this.place;
    let parent = above;
    if (lead) {
      this.#workflow = this.#open(`invoke_workflow ${name}`, ["workflow", this.#stretch], at, {
        [ATTR.operation]: "invoke_workflow",
        [ATTR.workflowName]: name,
        [ATTR.runId]: this.place.runId,
      });
      this.#workflow.parent = above;
      parent = this.#contextOf(this.#workflow);
    }
    this.#invocation = this.#open(`invoke_agent ${name}`, ["agent", this.#stretch], at, {
      ...this.place.attributes,
    });
    this.#invocation.parent = parent;
  }

  /** The context a subagent spawned by call `callId` starts in: that call's span. */
  contextOfCall(callId: string): SpanContext | undefined {
    const tool = this.#tools.get(callId);
    return tool ? this.#contextOf(tool.span) : undefined;
  }

  /**
   * This process goes on with the agent another left (a crash, a takeover): a model call or a
   * compaction under way ends as cut off where the agent's events stopped, and the spans from here on
   * are under a `resume_agent` span, linked to that call and to the calls it goes on waiting for.
   */
  resumed(at: number, attributes: Attributes, here: boolean): void {
    if (!this.#invocation) return;
    if (this.resumedHere && this.#resume) {
      this.resumedHere = false;
      Object.assign(this.#resume.attributes, attributes);
      return;
    }
    this.resumedHere = here;
    const links: Link[] = [...this.#tools.values()].map((tool) => ({ context: this.#contextOf(tool.span) }));
    const cut = "cut off: its host went away";
    if (this.#chat) {
      links.push({ context: this.#contextOf(this.#chat.span) });
      this.#end(this.#chat.span, this.lastAt, cut);
      this.#chat = undefined;
    }
    if (this.#compaction) this.#end(this.#compaction, this.lastAt, cut);
    if (this.#resume) this.#end(this.#resume, this.lastAt, "its host went away");
    this.#compaction = undefined;
    this.#resume = this.#open(`resume_agent ${this.place.name}`, ["resume", this.#stretch, at], at, {
      [ATTR.operation]: "resume_agent",
      [ATTR.agentName]: this.place.name,
      [ATTR.agentId]: this.place.agentId,
      ...attributes,
    });
    this.#resume.links = links;
    this.#resume.parent = this.#contextOf(this.#invocation);
  }

  on(event: AgentEvent): void {
    if (this.#chat?.completed && event.type !== "tool.requested") this.#endChat();
    switch (event.type) {
      case "state.changed":
        if (event.data.to === "callingModel") this.#openChat(event.ts);
        else if (event.data.to === "compacting")
          this.#compaction ??= this.#open("compact_context", ["compact", event.seq], event.ts, {
            [ATTR.operation]: "compact_context",
          });
        return;
      case "output.retried":
        this.#openChat(event.ts);
        return;
      case "model.delta":
        if (this.sink.captureContent && this.#chat) this.#text += event.data.text;
        return;
      case "model.retrying":
        this.#chat?.span.events.push({
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
        if (!this.#chat) this.#openChat(this.lastAt);
        (this.#chat as ChatSpan).completed = { at: event.ts, data: event.data };
        return;
      case "tool.requested":
        this.#toolRequested(event);
        return;
      case "approval.requested":
      case "approval.decided":
      case "approval.closed":
        this.#approval(event);
        return;
      case "tool.started": {
        const tool = this.#tools.get(event.data.callId);
        if (tool) tool.started = true;
        return;
      }
      case "tool.progress":
      case "sampling.finished":
      case "elicitation.finished":
        this.#toolNote(event);
        return;
      case "subagent.spawned":
        this.#subagentSpawned(event);
        return;
      case "tool.finished":
        this.#toolFinished(event);
        return;
      case "context.compacted":
        this.#compacted(event);
        return;
      case "agent.resumed":
        this.resumed(event.ts, { "troupe.resume.state": event.data.state }, false);
        return;
      case "agent.stopped":
        this.close(event.ts, undefined, event.data);
        return;
      default:
        return;
    }
  }

  /** Ends everything open of the agent at `at`: at its stop (`output`), or where its events end (`unfinished`). */
  close(at: number, unfinished: string | undefined, output?: AgentEventMap["agent.stopped"]): void {
    if (this.#chat) this.#endChat();
    const cut = unfinished ?? "cut off when the agent stopped";
    for (const tool of this.#tools.values()) {
      if (tool.approval) this.#end(tool.approval, at, cut);
      this.#end(tool.span, at, cut);
    }
    this.#tools.clear();
    if (this.#compaction) this.#end(this.#compaction, at, cut);
    if (this.#resume) this.#end(this.#resume, at, unfinished ? cut : undefined);
    const error = output ? (output.reason === "failed" ? (output.error ?? "failed") : undefined) : cut;
    for (const span of [this.#invocation, this.#workflow]) {
      if (!span) continue;
      if (output) Object.assign(span.attributes, stopAttributes(output));
      this.#end(span, at, error);
    }
    this.#invocation = this.#workflow = this.#resume = this.#compaction = undefined;
    this.#stretch++;
  }

  #openChat(at: number): void {
    if (this.#chat) this.#endChat();
    this.#endUnstarted(at);
    const { model } = this.place;
    const provider = this.sink.providerOf(model);
    const span = this.#open(`chat ${model}`, ["chat", this.#stretch, this.#chats++], at, {
      [ATTR.operation]: "chat",
      [ATTR.requestModel]: model,
      ...(provider ? { [ATTR.provider]: provider } : {}),
    });
    this.#chat = { span, calls: [] };
    this.#text = "";
  }

  /** Makes the model call's span, once the calls its answer asked for are known. */
  #endChat(): void {
    const chat = this.#chat;
    if (!chat) return;
    this.#chat = undefined;
    const completed = chat.completed;
    if (!completed) {
      this.#end(chat.span, this.lastAt, "the model call did not finish");
      return;
    }
    Object.assign(chat.span.attributes, chatAttributes(completed.data, this.place.model));
    if (completed.data.model !== this.place.model)
      chat.span.events.push({
        name: "troupe.model.fallback",
        time: completed.at,
        attributes: { [ATTR.responseModel]: completed.data.model },
      });
    if (this.sink.captureContent) {
      const text = this.#text ? [{ type: "text", content: this.#text }] : [];
      chat.span.attributes[ATTR.inputMessages] = JSON.stringify(this.#input);
      chat.span.attributes[ATTR.outputMessages] = JSON.stringify([
        { role: "assistant", parts: [...text, ...chat.calls], finish_reason: completed.data.finishReason },
      ]);
      this.#input = [];
    }
    const failed = completed.data.finishReason === "error";
    this.#end(chat.span, completed.at, failed ? "the model said the generation failed" : undefined);
  }

  #toolRequested(event: AgentEvent<"tool.requested">): void {
    const { callId, name, arguments: args } = event.data;
    const content = this.sink.captureContent;
    if (content) this.#chat?.calls.push({ type: "tool_call", id: callId, name, arguments: args });
    const sandbox = this.place.attributes["troupe.sandbox.mode"];
    const attributes = toolAttributes(event.data, typeof sandbox === "string" ? sandbox : undefined, content);
    const span = this.#open(`execute_tool ${name}`, ["tool", callId], event.ts, attributes);
    const refused = event.data.error;
    this.#tools.set(callId, { span, started: false, ...(refused ? { refused } : {}) });
  }

  /** Calls of the last turn that never started (denied, by the policy or a person) end when the next turn begins. */
  #endUnstarted(at: number): void {
    for (const [callId, tool] of this.#tools) {
      if (tool.started) continue;
      this.#tools.delete(callId);
      if (tool.approval) this.#end(tool.approval, at, undefined);
      this.#end(tool.span, at, tool.refused ?? "not run");
    }
  }

  #approval(event: AgentEvent<"approval.requested" | "approval.decided" | "approval.closed">): void {
    const { callId } = event.data;
    const tool = this.#tools.get(callId);
    if (!tool) return;
    if (event.type === "approval.requested") {
      const { name } = event.data as AgentEventMap["approval.requested"];
      tool.approval = this.#open(`await_approval ${name}`, ["approval", callId], event.ts, {
        [ATTR.operation]: "await_approval",
        [ATTR.toolCallId]: callId,
      });
      tool.approval.parent = this.#contextOf(tool.span);
      return;
    }
    const waited = tool.approval ? event.ts - tool.approval.start : 0;
    const decided =
      event.type === "approval.decided" ? (event.data as AgentEventMap["approval.decided"]) : undefined;
    const answer = decided
      ? { "troupe.approval.approved": decided.approved, "troupe.approval.by": decided.by }
      : { "troupe.approval.closed": (event.data as AgentEventMap["approval.closed"]).why };
    Object.assign(tool.span.attributes, answer, { "troupe.approval.wait_ms": waited });
    if (!tool.approval) return;
    Object.assign(tool.approval.attributes, answer);
    this.#end(tool.approval, event.ts, undefined);
    tool.approval = undefined;
  }

  /** What happened while a call ran (its progress, an MCP server's sampling or question): an event on its span. */
  #toolNote(event: AgentEvent<"tool.progress" | "sampling.finished" | "elicitation.finished">): void {
    const tool = this.#tools.get(event.data.callId);
    if (!tool) return;
    const attributes = noteAttributes(event.data);
    tool.span.events.push({ name: `troupe.${event.type}`, time: event.ts, attributes });
  }

  #subagentSpawned(event: AgentEvent<"subagent.spawned">): void {
    const { callId, childId } = event.data;
    if (callId === undefined) return;
    this.spawned(childId, callId);
    const tool = this.#tools.get(callId);
    if (tool) tool.span.attributes["troupe.subagent.id"] = childId;
  }

  #toolFinished(event: AgentEvent<"tool.finished">): void {
    const { callId, ok, error, preview, durationMs } = event.data;
    const tool = this.#tools.get(callId);
    if (!tool) return;
    this.#tools.delete(callId);
    tool.span.attributes["troupe.tool.ok"] = ok;
    tool.span.attributes["troupe.tool.duration_ms"] = durationMs;
    if (this.sink.captureContent) {
      if (preview !== undefined) tool.span.attributes[ATTR.toolResult] = preview;
      const response = preview ?? error ?? "";
      this.#input.push({ role: "tool", parts: [{ type: "tool_call_response", id: callId, response }] });
    }
    if (tool.approval) this.#end(tool.approval, event.ts, "the call ended while it waited");
    this.#end(tool.span, event.ts, ok ? undefined : (error ?? "the call failed"));
  }

  #compacted(event: AgentEvent<"context.compacted">): void {
    const span =
      this.#compaction ??
      this.#open("compact_context", ["compact", event.seq], event.ts, {
        [ATTR.operation]: "compact_context",
      });
    this.#compaction = undefined;
    Object.assign(span.attributes, {
      "troupe.compaction.tokens_before": event.data.tokensBefore,
      "troupe.compaction.tokens_after": event.data.tokensAfter,
      [ATTR.inputTokens]: event.data.usage.inputTokens,
      [ATTR.outputTokens]: event.data.usage.outputTokens,
    });
    this.#end(span, event.ts, undefined);
  }

  /** A span of this agent opened at `at`, under its resume if it was resumed, else under its invocation. */
  #open(name: string, key: readonly (string | number)[], at: number, attributes: Attributes): OpenSpan {
    const { runId, agentId } = this.place;
    const above = this.#resume ?? this.#invocation;
    return {
      name,
      id: spanIdOf(runId, agentId, String(key[0]), key.slice(1).join(".")),
      parent: above ? this.#contextOf(above) : undefined,
      start: at,
      attributes,
      events: [],
      links: [],
    };
  }

  #contextOf(span: OpenSpan): SpanContext {
    return { traceId: this.place.traceId, spanId: span.id, traceFlags: this.place.flags, isRemote: true };
  }

  /** Makes the span, as it was, and ends it: nothing while replaying what another process made. */
  #end(span: OpenSpan, at: number, error: string | undefined): void {
    if (!this.replaying()) makeSpan(this.sink, this.place.traceId, span, at, error);
  }
}
