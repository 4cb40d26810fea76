import { buildRunTree, type TreeNode } from "../actors/run-tree.js";
import { loadConfig } from "../config/load.js";
import { UserError } from "../errors.js";
import type { Logger } from "../log.js";
import { agentMachine } from "../machines/agent-machine.js";
import { mermaidDiagram } from "../machines/diagram.js";
import { connectClient } from "./client.js";

export class InspectError extends UserError {
  override name = "InspectError";
}

/** `troupe inspect RUN_ID [AGENT_ID]`: from the event log alone, so it works for any run on the bus. */
export async function runInspect(
  configPath: string | undefined,
  runId: string,
  agentId: string | undefined,
  log: Logger,
): Promise<number> {
  const config = loadConfig({ config: configPath });
  const bus = await connectClient(config, "troupe-inspect", log);
  try {
    const events = [];
    for await (const { envelope } of bus.log.read({ runId })) events.push(envelope);
    if (events.length === 0)
      throw new InspectError(`no events for run ${runId}; troupe status lists the runs`);
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
    const state = node.reason ? "stopped" : node.state;
    const out = [
      `# ${node.name} (${node.agentId}) in ${runId}: ${node.reason ? `stopped (${node.reason})` : state}`,
      "",
      "```mermaid",
      mermaidDiagram(agentMachine, state),
      "```",
      "",
      "transitions:",
      ...node.transitions.map((t) => `  ${new Date(t.at).toISOString()}  ${t.from} → ${t.to}`),
    ];
    const since = node.transitions.at(-1);
    if (since && !node.reason)
      out.push(`  (in ${state} for ${Math.round((Date.now() - since.at) / 1000)} s)`);
    process.stdout.write(`${out.join("\n")}\n`);
    return 0;
  } finally {
    await bus.close();
  }
}
