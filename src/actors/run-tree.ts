import type { Budget } from "../config/budget-schema.js";
import { type AgentEvent, type AgentEventMap, isAgentEvent, isEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import type { Usage } from "../model/types.js";
import { visibleLine } from "../util/visible.js";

/** One agent of a run as its events describe it. */
export interface TreeNode {
  runId: string;
  agentId: string;
  name: string;
  /** What it was asked to do. */
  task: string;
  parentId: string | undefined;
  depth: number;
  budget: Budget;
  /** The machine state it is in (`stopped` at the end). */
  state: string;
  /** What it and its subtree have spent, as last reported. */
  usage: Usage | undefined;
  toolCalls: number;
  turns: number;
  /** What its last request filled of the model's window (`context.usage`), once known. */
  context: AgentEventMap["context.usage"] | undefined;
  /** Why it stopped, once it has. */
  reason: string | undefined;
  /** The tool call running now, if any. */
  tool: string | undefined;
  /** How far that call has come, once its tool said (`tool.progress`). */
  toolProgress: ToolProgressData | undefined;
  /** The end of what the model is streaming (or last streamed). */
  text: string;
  /** The end of the model's reasoning in the current (or last) turn. */
  reasoning: string;
  /** Pending approval requests, by call id. */
  approvals: Map<string, AgentEventMap["approval.requested"]>;
  /** Each state it entered, with when (ms since the epoch). */
  transitions: Array<{ from: string; to: string; at: number }>;
  children: TreeNode[];
}

/** A call's progress as its `tool.progress` said it. */
export type ToolProgressData = Pick<AgentEventMap["tool.progress"], "progress" | "total" | "message">;

const TEXT_KEPT = 400;

/**
 * A running call's progress in a few words, `3/6 · indexing` (or `3 · …` with no total): the server's
 * message, which it wrote, shown on one line with its control characters visible.
 */
export function progressLabel({ progress, total, message }: ToolProgressData): string {
  const count = total === undefined ? `${progress}` : `${progress}/${total}`;
  return message ? `${count} · ${visibleLine(message)}` : count;
}

/**
 * Builds the tree of runs from their events, one event at a time: who spawned whom, each agent's
 * state, spend, current tool, streaming text and reasoning, and pending approvals. The event log
 * alone is enough.
 */
export class RunTreeBuilder {
  readonly nodes = new Map<string, TreeNode>();

  apply(event: Envelope): TreeNode | undefined {
    if (isEvent(event, "agent.started")) return this.#start(event);
    const node = this.nodes.get(`${event.runId}/${event.agentId}`);
    if (node && isAgentEvent(event)) update(node, event);
    return node;
  }

  #start(event: AgentEvent<"agent.started">): TreeNode {
    const { data } = event;
    const node: TreeNode = {
      runId: event.runId,
      agentId: event.agentId,
      name: data.name,
      task: data.task,
      parentId: event.parentId,
      depth: data.depth,
      budget: data.budget,
      state: "idle",
      usage: undefined,
      toolCalls: 0,
      turns: 0,
      context: undefined,
      reason: undefined,
      tool: undefined,
      toolProgress: undefined,
      text: "",
      reasoning: "",
      approvals: new Map(),
      transitions: [],
      children: [],
    };
    this.nodes.set(`${event.runId}/${event.agentId}`, node);
    const parent =
      event.parentId === undefined ? undefined : this.nodes.get(`${event.runId}/${event.parentId}`);
    parent?.children.push(node);
    return node;
  }

  /** The agents no other agent spawned (in this view), in the order they started. */
  roots(): TreeNode[] {
    return [...this.nodes.values()].filter(
      (node) => node.parentId === undefined || !this.nodes.has(`${node.runId}/${node.parentId}`),
    );
  }
}

/** What an event of a started agent changes in its node. */
function update(node: TreeNode, event: AgentEvent): void {
  switch (event.type) {
    case "state.changed": {
      const { data } = event;
      node.state = data.to;
      // Moving again after it stopped: resumed, and no longer stopped for the reason it gave then.
      if (data.to !== "stopped") node.reason = undefined;
      node.transitions.push({ ...data, at: event.ts });
      if (data.to === "callingModel") {
        node.text = "";
        node.reasoning = "";
      }
      break;
    }
    case "model.delta":
      node.text = (node.text + event.data.text).slice(-TEXT_KEPT);
      break;
    case "model.reasoning":
      node.reasoning = (node.reasoning + event.data.text).slice(-TEXT_KEPT);
      break;
    case "tool.started":
      node.tool = event.data.name;
      node.toolProgress = undefined;
      break;
    case "tool.progress": {
      const { progress, total, message } = event.data;
      node.toolProgress = { progress, total, message };
      break;
    }
    case "tool.finished":
      node.tool = undefined;
      node.toolProgress = undefined;
      break;
    case "approval.requested":
      node.approvals.set(event.data.callId, event.data);
      break;
    case "approval.decided":
      node.approvals.delete(event.data.callId);
      break;
    case "context.usage":
      node.context = event.data;
      break;
    case "context.compacted": {
      const { tokensAfter } = event.data;
      if (node.context) {
        const { contextWindow } = node.context;
        node.context = {
          tokens: tokensAfter,
          contextWindow,
          percent: Math.round((tokensAfter / contextWindow) * 100),
        };
      }
      break;
    }
    case "usage.updated":
      node.usage = event.data.usage;
      node.toolCalls = event.data.toolCalls;
      node.turns = event.data.turns;
      break;
    case "agent.stopped": {
      const { data } = event;
      node.reason = data.reason;
      // A refusal never streamed: its words are what the agent said last.
      if (data.reason === "refused") node.text = data.result.slice(-TEXT_KEPT);
      node.usage = data.total.usage;
      node.toolCalls = data.total.toolCalls;
      node.turns = data.turns;
      node.tool = undefined;
      node.toolProgress = undefined;
      node.approvals.clear();
      break;
    }
  }
}

/** Rebuilds the tree of a run (or several) from its event log alone. */
export function buildRunTree(events: Iterable<Envelope>): TreeNode[] {
  const builder = new RunTreeBuilder();
  for (const event of events) builder.apply(event);
  return builder.roots();
}
