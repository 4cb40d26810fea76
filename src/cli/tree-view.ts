import type { RunTreeBuilder, TreeNode } from "../actors/run-tree.js";
import type { ApprovalRecord, ApprovalRef } from "../safety/bus-approver.js";

/**
 * The requests behind pending approvals, as their hosts wrote them: what the a/d keys answer is
 * what is shown, never an event's copy. `watchOnly` when this terminal cannot read them (an
 * observer's credentials), and so cannot answer.
 */
export interface ShownRequests {
  record(ref: ApprovalRef): ApprovalRecord | undefined;
  watchOnly: boolean;
}

/**
 * The observer's live view, as lines: each run's tree of agents with its machine state, turns,
 * tokens and cost against the budget as bars, the tool running now, the streaming text of the agent
 * that last spoke, and pending approvals with the keys that answer the first one.
 */
export function renderTree(
  builder: RunTreeBuilder,
  focus: TreeNode | undefined,
  width = 100,
  requests: ShownRequests = { record: () => undefined, watchOnly: true },
): string[] {
  const lines: string[] = [];
  const pending: Array<{ node: TreeNode; callId: string; name: string; detail: string }> = [];
  const visit = (node: TreeNode, indent: string, last: boolean, root: boolean) => {
    const branch = root ? "" : last ? "└─ " : "├─ ";
    const state = node.reason ? `stopped: ${node.reason}` : node.state;
    const tokens = (node.usage?.inputTokens ?? 0) + (node.usage?.outputTokens ?? 0);
    const parts = [
      `${indent}${branch}${node.name} ${dim(`(${node.agentId})`)}`,
      pad(state, 18),
      `turn ${node.turns}${node.budget.maxTurns ? `/${node.budget.maxTurns}` : ""}`,
      `tokens ${bar(tokens, node.budget.maxTokens)} ${compact(tokens)}${node.budget.maxTokens ? `/${compact(node.budget.maxTokens)}` : ""}`,
      `$${(node.usage?.costUsd ?? 0).toFixed(4)}${node.budget.maxCostUsd ? ` ${bar(node.usage?.costUsd ?? 0, node.budget.maxCostUsd)}` : ""}`,
    ];
    if (node.tool) parts.push(`▸ ${node.tool}`);
    lines.push(parts.join("  "));
    for (const [callId, approval] of node.approvals)
      pending.push({ node, callId, name: approval.name, detail: approval.detail });
    const childIndent = root ? indent : `${indent}${last ? "   " : "│  "}`;
    node.children.forEach((child, i) => {
      visit(child, childIndent, i === node.children.length - 1, false);
    });
  };
  const roots = builder.roots();
  for (const root of roots) {
    lines.push(bold(`run ${root.runId}`));
    visit(root, "", true, true);
    lines.push("");
  }
  if (roots.length === 0) lines.push(dim("waiting for runs…"), "");
  if (focus?.text)
    lines.push(`${bold(focus.name)}: ${oneLine(focus.text).slice(-(width - focus.name.length - 2))}`);
  const [first, ...more] = pending;
  if (first) {
    const waiting = more.length ? `   (${more.length} more waiting)` : "";
    const record = requests.record({
      runId: first.node.runId,
      agentId: first.node.agentId,
      callId: first.callId,
    });
    const wants = (tool: string, detail: string) =>
      bold(`approval: ${first.node.name} wants ${tool}: ${oneLine(detail).slice(0, width - 30)}`);
    if (requests.watchOnly)
      lines.push(
        "",
        wants(first.name, first.detail),
        dim(`  (watch only: this terminal cannot answer)${waiting}`),
      );
    else if (record)
      lines.push("", wants(record.request.tool, record.request.detail), `  [a] allow  [d] deny${waiting}`);
    else
      lines.push("", bold(`approval: ${first.node.name} wants ${first.name}`), dim("  reading the request…"));
  }
  lines.push(dim("q to quit"));
  return lines;
}

/** The first pending approval in the view, for the a/d keys. */
export function firstPending(
  builder: RunTreeBuilder,
): { runId: string; agentId: string; callId: string } | undefined {
  for (const node of builder.nodes.values()) {
    const callId = node.approvals.keys().next().value;
    if (callId !== undefined) return { runId: node.runId, agentId: node.agentId, callId };
  }
  return undefined;
}

function bar(value: number, max: number | undefined, width = 10): string {
  if (!max) return "";
  const filled = Math.max(0, Math.min(width, Math.round((value / max) * width)));
  return `[${"█".repeat(filled)}${"░".repeat(width - filled)}]`;
}

function compact(n: number): string {
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n);
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + " ".repeat(width - text.length);
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

const tty = process.stdout.isTTY === true;
function bold(text: string): string {
  return tty ? `\x1b[1m${text}\x1b[22m` : text;
}
function dim(text: string): string {
  return tty ? `\x1b[2m${text}\x1b[22m` : text;
}
