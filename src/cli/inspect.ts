import { AgentStore } from "../actors/agent-store.js";
import { buildRunTree, type TreeNode } from "../actors/run-tree.js";
import { type ConfigChoice, type LoadedConfig, loadConfig } from "../config/load.js";
import { UserError } from "../errors.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import { agentMachine } from "../machines/agent-machine.js";
import { persistedFacts } from "../machines/agent-persisted.js";
import { mermaidDiagram } from "../machines/diagram.js";
import { visibleLine as v, visible } from "../util/visible.js";
import { connectClient } from "./client.js";
import { eventsOf, storeOf } from "./history.js";
import { localBus } from "./run.js";

export class InspectError extends UserError {
  override name = "InspectError";
}

/**
 * `troupe inspect RUN_ID [AGENT_ID]`: from the event log alone, so it works for any run on the bus;
 * a local run (`troupe run --local`, kept in the data dir) is read from there, with no daemon, and
 * says what its stored snapshot holds (where `troupe resume` would start).
 */
export async function runInspect(
  where: ConfigChoice,
  runId: string,
  agentId: string | undefined,
  log: Logger,
): Promise<number> {
  const config = loadConfig(where);
  const local = eventsOf(storeOf(config), runId, log);
  if (local) {
    const node = agentOf(local, runId, agentId);
    const snapshot = await storedSnapshot(config, log, runId, node.agentId);
    process.stdout.write(`${describe(node, runId, snapshot).join("\n")}\n`);
    return 0;
  }
  const bus = await connectClient(config, "troupe-inspect", log);
  try {
    const events = [];
    for await (const { envelope } of bus.eventLog.read({ runId })) events.push(envelope);
    if (events.length === 0)
      throw new InspectError(
        `no events for run ${runId} here or on the daemon; troupe runs lists them, local runs too`,
      );
    process.stdout.write(`${describe(agentOf(events, runId, agentId), runId).join("\n")}\n`);
    return 0;
  } finally {
    await bus.close();
  }
}

function agentOf(events: Envelope[], runId: string, agentId: string | undefined): TreeNode {
  const nodes: TreeNode[] = [];
  const walk = (node: TreeNode) => {
    nodes.push(node);
    node.children.forEach(walk);
  };
  buildRunTree(events).forEach(walk);
  const node = agentId ? nodes.find((n) => n.agentId === agentId) : nodes[0];
  if (!node)
    throw new InspectError(
      `no agent ${agentId} in run ${runId}; its agents are ${nodes.map((n) => n.agentId).join(", ")}`,
    );
  return node;
}

/** What a local agent's stored snapshot says, in one line; undefined when there is none. */
async function storedSnapshot(
  config: LoadedConfig,
  log: Logger,
  runId: string,
  agentId: string,
): Promise<string | undefined> {
  const bus = localBus(config, log);
  try {
    const record = await (await AgentStore.open(bus, log)).load(runId, agentId);
    if (!record) return undefined;
    const { value, turns } = persistedFacts(record.snapshot);
    return `stored snapshot: ${String(value)}, ${turns} turn${turns === 1 ? "" : "s"}, ${Math.round(record.elapsedMs / 1000)} s, next event seq ${record.nextSeq}`;
  } catch (error) {
    return `stored snapshot: unreadable (${error instanceof Error ? error.message : String(error)})`;
  } finally {
    await bus.close();
  }
}

function describe(node: TreeNode, runId: string, snapshot?: string): string[] {
  const state = node.reason ? "stopped" : node.state;
  // All of it from the run's events: names, ids and states are shown, never obeyed.
  const out = [
    `# ${v(node.name)} (${v(node.agentId)}) in ${v(runId)}: ${node.reason ? `stopped (${v(node.reason)})` : v(state)}`,
    "",
    "```mermaid",
    visible(mermaidDiagram(agentMachine, state)),
    "```",
    "",
    "transitions:",
    ...node.transitions.map((t) => `  ${new Date(t.at).toISOString()}  ${v(t.from)} → ${v(t.to)}`),
  ];
  const since = node.transitions.at(-1);
  if (since && !node.reason)
    out.push(`  (in ${v(state)} for ${Math.round((Date.now() - since.at) / 1000)} s)`);
  if (snapshot) out.push("", visible(snapshot));
  return out;
}
