import type { Envelope } from "../bus/envelope.js";
import type { Budget } from "../config/schema.js";
import type { Usage } from "../model/types.js";
import type { AgentEventMap } from "./agent-events.js";

/** One agent of a run as its events describe it. */
export interface TreeNode {
  agentId: string;
  name: string;
  parentId: string | undefined;
  depth: number;
  budget: Budget;
  /** The machine state it is in (`stopped` at the end). */
  state: string;
  /** What it and its subtree have spent, as last reported. */
  usage: Usage | undefined;
  toolCalls: number;
  turns: number;
  /** Why it stopped, once it has. */
  reason: string | undefined;
  children: TreeNode[];
}

/**
 * Rebuilds the tree of a run from its event log alone: who spawned whom, each agent's state and
 * spend. Events can come in any interleaving of agents; each agent's own are in seq order.
 */
export function buildRunTree(events: Iterable<Envelope>): TreeNode[] {
  const nodes = new Map<string, TreeNode>();
  for (const event of events) {
    if (event.type === "agent.started") {
      const data = event.data as AgentEventMap["agent.started"];
      nodes.set(event.agentId, {
        agentId: event.agentId,
        name: data.name,
        parentId: event.parentId,
        depth: data.depth,
        budget: data.budget,
        state: "idle",
        usage: undefined,
        toolCalls: 0,
        turns: 0,
        reason: undefined,
        children: [],
      });
      continue;
    }
    const node = nodes.get(event.agentId);
    if (!node) continue;
    if (event.type === "state.changed") node.state = (event.data as AgentEventMap["state.changed"]).to;
    if (event.type === "usage.updated") {
      const data = event.data as AgentEventMap["usage.updated"];
      node.usage = data.usage;
      node.toolCalls = data.toolCalls;
      node.turns = data.turns;
    }
    if (event.type === "agent.stopped") {
      const data = event.data as AgentEventMap["agent.stopped"];
      node.reason = data.reason;
      node.usage = data.total.usage;
      node.toolCalls = data.total.toolCalls;
      node.turns = data.turns;
    }
  }
  const roots: TreeNode[] = [];
  for (const node of nodes.values()) {
    const parent = node.parentId === undefined ? undefined : nodes.get(node.parentId);
    if (parent) parent.children.push(node);
    else roots.push(node);
  }
  return roots;
}
