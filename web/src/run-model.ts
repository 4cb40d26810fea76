import { progressLabel, RunTreeBuilder, type TreeNode } from "../../src/actors/run-tree.js";
import { isAgentEvent } from "../../src/events/agent-events.js";
import type { Envelope } from "../../src/events/envelope.js";

/** One item of an agent's conversation as the page shows it. */
export type Item =
  | { kind: "task"; text: string }
  | { kind: "text" | "reasoning"; text: string; open: boolean }
  | {
      kind: "tool";
      callId: string;
      name: string;
      args: string;
      status: "asked" | "running" | "ok" | "error" | "denied";
      /** How far it has come while it runs, `3/6 · indexing`, as its server last said. */
      progress?: string;
      preview?: string;
      error?: string;
      durationMs?: number;
    }
  | { kind: "approval"; callId: string; approved: boolean; by: string; reason?: string }
  /** A request closed unanswered: its agent stopped while it waited. */
  | { kind: "closed"; callId: string; why: string }
  | { kind: "stopped"; reason: string; result: string };

/** A bar of the timeline: a model call, a tool call or a subagent, of one agent, from `start` to `end`. */
export interface Span {
  agentId: string;
  kind: "model" | "tool" | "subagent";
  label: string;
  start: number;
  end?: number;
}

/**
 * A run as its events tell it, built one event at a time: the agent tree (the terminal observer's own
 * builder), each agent's conversation, and the spans of the timeline. The log alone is enough.
 */
export class RunModel {
  readonly tree = new RunTreeBuilder();
  readonly conversations = new Map<string, Item[]>();
  readonly spans: Span[] = [];
  /** Events applied, and the time of the first and last. */
  count = 0;
  /** Approval events applied: the page asks for the run's approvals again when this changes. */
  approvalEvents = 0;
  first: number | undefined;
  last: number | undefined;
  #open = new Map<string, Span>();

  apply(event: Envelope): void {
    this.count++;
    this.first ??= event.ts;
    this.last = event.ts;
    this.tree.apply(event);
    if (!isAgentEvent(event)) return;
    if (event.type.startsWith("approval.")) this.approvalEvents++;
    const items = this.#items(event.agentId);
    switch (event.type) {
      case "agent.started":
        items.push({ kind: "task", text: event.data.task });
        break;
      case "model.delta":
      case "model.reasoning": {
        const kind = event.type === "model.delta" ? "text" : "reasoning";
        const lastItem = items.at(-1);
        const text = event.data.text;
        if (lastItem?.kind === kind && lastItem.open) lastItem.text += text;
        else items.push({ kind, text, open: true });
        break;
      }
      case "model.completed":
        for (const item of items) if (item.kind === "text" || item.kind === "reasoning") item.open = false;
        break;
      case "state.changed": {
        const { to } = event.data;
        const key = `${event.agentId}/model`;
        this.#end(key, event.ts);
        if (to === "callingModel")
          this.#begin(key, { agentId: event.agentId, kind: "model", label: "model", start: event.ts });
        break;
      }
      case "tool.requested": {
        const data = event.data;
        items.push({
          kind: "tool",
          callId: data.callId,
          name: data.name,
          args: data.arguments,
          status: data.decision === "deny" ? "denied" : "asked",
          ...(data.error ? { error: data.error } : {}),
        });
        break;
      }
      case "tool.started": {
        const data = event.data;
        const call = this.#call(items, data.callId);
        if (call) call.status = "running";
        this.#begin(`${event.agentId}/tool/${data.callId}`, {
          agentId: event.agentId,
          kind: "tool",
          label: data.name,
          start: event.ts,
        });
        break;
      }
      case "tool.progress": {
        const call = this.#call(items, event.data.callId);
        if (call) call.progress = progressLabel(event.data);
        break;
      }
      case "tool.finished": {
        const data = event.data;
        const call = this.#call(items, data.callId);
        if (call) {
          call.progress = undefined;
          call.status = data.ok ? "ok" : "error";
          call.durationMs = data.durationMs;
          if (data.preview) call.preview = data.preview;
          if (data.error) call.error = data.error;
        }
        this.#end(`${event.agentId}/tool/${data.callId}`, event.ts);
        break;
      }
      case "approval.decided": {
        const data = event.data;
        items.push({
          kind: "approval",
          callId: data.callId,
          approved: data.approved,
          by: data.by,
          ...(data.reason ? { reason: data.reason } : {}),
        });
        break;
      }
      case "approval.closed":
        items.push({ kind: "closed", callId: event.data.callId, why: event.data.why });
        break;
      case "subagent.spawned": {
        const data = event.data;
        this.#begin(`${event.agentId}/sub/${data.childId}`, {
          agentId: event.agentId,
          kind: "subagent",
          label: data.name,
          start: event.ts,
        });
        break;
      }
      case "subagent.finished":
        this.#end(`${event.agentId}/sub/${event.data.childId}`, event.ts);
        break;
      case "agent.stopped": {
        const data = event.data;
        items.push({ kind: "stopped", reason: data.reason, result: data.result });
        for (const [key, span] of this.#open) if (span.agentId === event.agentId) this.#end(key, event.ts);
        break;
      }
    }
  }

  /** The top agents of the run (those without a parent here). */
  roots(): TreeNode[] {
    return [...this.tree.nodes.values()].filter((node) => node.parentId === undefined);
  }

  #items(agentId: string): Item[] {
    let items = this.conversations.get(agentId);
    if (!items) {
      items = [];
      this.conversations.set(agentId, items);
    }
    return items;
  }

  #call(items: Item[], callId: string) {
    for (let i = items.length - 1; i >= 0; i--) {
      const item = items[i];
      if (item?.kind === "tool" && item.callId === callId) return item;
    }
    return undefined;
  }

  #begin(key: string, span: Span): void {
    this.spans.push(span);
    this.#open.set(key, span);
  }

  #end(key: string, at: number): void {
    const span = this.#open.get(key);
    if (span) span.end = at;
    this.#open.delete(key);
  }
}
