import cliTruncate from "cli-truncate";
import { progressLabel, type RunTreeBuilder, type TreeNode } from "../actors/run-tree.js";
import { type ApprovalRecord, type ApprovalRef, approvalKey } from "../approvals/approval-record.js";
import { contextLevel } from "../context/context-levels.js";
import { visibleLine } from "../util/visible.js";
import { becauseLine, quotedLines, requestText, textLabel } from "./request-text.js";

/**
 * The requests behind pending approvals, as their hosts wrote them: what the a/d keys answer is
 * what is shown, never an event's copy. `watchOnly` when this terminal cannot read them (an
 * observer's credentials), and so cannot answer.
 */
export interface ShownRequests {
  record(ref: ApprovalRef): ApprovalRecord | undefined;
  watchOnly: boolean;
}

/** What the observer's frame is drawn from besides the tree: where it watches, and what is picked. */
export interface ViewState {
  /** `troupe observe · nats://… · prefix …`: what this view watches. */
  header: string;
  /** The picked agent (`runId/agentId`), moved with the arrow keys; the newest speaker when none. */
  selected: string | undefined;
  /** The agent that last streamed text or reasoning. */
  speaker: TreeNode | undefined;
  /** One line of news: a warning, lost contact with the daemon. */
  status: string | undefined;
  /**
   * The approval (its key) the last frame showed whole and offered `a` for: a request shown only in
   * part cannot be allowed from here. Written by `renderFrame`.
   */
  allowable?: string | undefined;
}

/** A pending approval as the view lists it. */
export interface PendingApproval {
  node: TreeNode;
  callId: string;
}

const DETAIL_LINES = 5;

/**
 * The observer's live view as a frame of at most `rows` lines, none wider than `columns`: each
 * run's tree of agents (state, turns, tokens and cost against the budget as bars, the tool running
 * now), the picked agent's streaming reasoning (dimmed) and text, the approval to answer with its
 * command or diff quoted and paths, one status line and the keys. A tree taller than the room left
 * scrolls to keep the picked agent in view. Every string from a run (names, ids, tasks, text, tools,
 * commands, errors) is shown through `visibleLine` or `quoted`: nothing in it is obeyed.
 */
export function renderFrame(
  builder: RunTreeBuilder,
  view: ViewState,
  screen: { columns: number; rows: number },
  requests: ShownRequests = { record: () => undefined, watchOnly: true },
): string[] {
  const columns = Math.max(20, screen.columns);
  const rows = Math.max(6, screen.rows);
  const tree = treeRows(builder, columns);
  const picked = pickedNode(builder, view);
  const pending = pendingApprovals(builder);
  const answering = pending.find((p) => p.node === picked) ?? pending[0];

  const focus = picked?.text || picked?.reasoning ? picked : view.speaker;
  const said = (text: string | undefined, shown: (line: string) => string) => {
    if (!focus || !text) return [];
    const name = visibleLine(focus.name);
    return [`${bold(name)}: ${shown(tail(visibleLine(oneLine(text)), columns - name.length - 2))}`];
  };
  // Its reasoning (dimmed) above what it says.
  const above = [...said(focus?.reasoning, dim), ...said(focus?.text, (line) => line)];
  const below = [
    ...(view.status ? [yellow(visibleLine(view.status))] : []),
    dim(`↑/↓ pick an agent${pending.length && !requests.watchOnly ? " · a/d answer" : ""} · q quit`),
  ];
  // The approval's command is shown whole, wrapped, when it fits beside a line of the tree; else its
  // first lines, without the allow key (the tree keeps a few lines, the command gives way first).
  const fits = (panel: string[], tree: number) =>
    1 + tree + above.length + panel.length + below.length <= rows;
  let panel: string[] = [];
  view.allowable = undefined;
  if (answering) {
    const width = columns - 4;
    panel = approvalPanel(answering, pending.length, requests, { width });
    if (fits(panel, 1)) view.allowable = allowKey(answering, requests);
    else
      for (let detail = DETAIL_LINES; detail >= 1; detail--) {
        panel = approvalPanel(answering, pending.length, requests, { width, detail });
        if (fits(panel, Math.min(tree.length, 3))) break;
      }
  }
  const room = Math.max(1, rows - 1 - above.length - panel.length - below.length);
  const treeLines = scrolled(tree, picked, room);
  const rest = [...above, ...panel, ...below];
  // On a very small screen the tree gives way, then the command's lines; the question and keys stay.
  while (1 + treeLines.length + rest.length > rows && treeLines.length > 1) treeLines.pop();
  while (1 + treeLines.length + rest.length > rows && rest.length > below.length + 2)
    rest.splice(rest.length - below.length - 2, 1);
  return [dim(visibleLine(view.header)), ...treeLines, ...rest]
    .slice(0, rows)
    .map((line) => cliTruncate(line, columns));
}

/** The tree as lines, with the node each shows (run headers show none), columns lined up. */
function treeRows(builder: RunTreeBuilder, columns: number): Array<{ node?: TreeNode; line: string }> {
  const roots = builder.roots();
  if (roots.length === 0) return [{ line: dim("waiting for runs…") }];
  const agents: Array<{ node: TreeNode; label: string }> = [];
  const lines: Array<{ node?: TreeNode; label?: string; line?: string }> = [];
  const visit = (node: TreeNode, indent: string, last: boolean, root: boolean) => {
    const branch = root ? "" : last ? "└─ " : "├─ ";
    const entry = {
      node,
      label: `${indent}${branch}${visibleLine(node.name)} (${visibleLine(node.agentId)})`,
    };
    agents.push(entry);
    lines.push(entry);
    const childIndent = root ? indent : `${indent}${last ? "   " : "│  "}`;
    node.children.forEach((child, i) => {
      visit(child, childIndent, i === node.children.length - 1, false);
    });
  };
  for (const root of roots) {
    lines.push({
      line: `${bold(`run ${visibleLine(root.runId)}`)}  ${dim(visibleLine(oneLine(root.task)).slice(0, 80))}`,
    });
    visit(root, "", true, true);
  }
  const labelWidth = Math.max(...agents.map((a) => a.label.length));
  // Bars and aligned columns where they fit; where they do not (60 columns), the short form, so that
  // tokens and cost stay in view.
  const wide = agents.every((a) => plainWidth(agentLine(a.node, a.label.padEnd(labelWidth))) <= columns);
  return lines.map((entry) =>
    entry.node && entry.label !== undefined
      ? {
          node: entry.node,
          line: wide
            ? agentLine(entry.node, entry.label.padEnd(labelWidth))
            : shortAgentLine(entry.node, entry.label.padEnd(labelWidth)),
        }
      : { line: entry.line ?? "" },
  );
}

/** Columns a line takes on the screen, its colours left out. */
function plainWidth(line: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the colour codes this file writes
  return [...line.replace(/\x1b\[[0-9;]*m/g, "")].length;
}

/** The machine's longer states, as the short row says them. */
const SHORT_STATES: Record<string, string> = {
  awaitingApproval: "asking",
  callingModel: "model",
  executingTools: "tools",
  compactingAsked: "compacting",
};

/** An agent's row in few columns: its state, then turns, tokens, cost and context as figures, no bars. */
function shortAgentLine(node: TreeNode, label: string): string {
  const state = visibleLine(node.reason ?? SHORT_STATES[node.state] ?? node.state);
  const tokens = (node.usage?.inputTokens ?? 0) + (node.usage?.outputTokens ?? 0);
  const { maxTurns, maxTokens } = node.budget;
  const parts = [
    label,
    state,
    `t${node.turns}${maxTurns ? `/${maxTurns}` : ""}`,
    `${compact(tokens)}${maxTokens ? `/${compact(maxTokens)}` : ""} tok`,
    `$${(node.usage?.costUsd ?? 0).toFixed(4)}`,
    ...(node.context ? [`ctx ${Math.round(node.context.percent)}%`] : []),
    ...(node.tool ? [`▸ ${visibleLine(node.tool)}`] : []),
  ];
  return parts.join(" ");
}

function agentLine(node: TreeNode, label: string): string {
  const state = visibleLine(node.reason ? `stopped: ${node.reason}` : node.state);
  const tokens = (node.usage?.inputTokens ?? 0) + (node.usage?.outputTokens ?? 0);
  const { maxTurns, maxTokens, maxCostUsd } = node.budget;
  const cost = node.usage?.costUsd ?? 0;
  const parts = [
    label,
    state.padEnd(17),
    `turn ${`${node.turns}${maxTurns ? `/${maxTurns}` : ""}`.padEnd(5)}`,
    `tokens ${bar(tokens, maxTokens)}${`${compact(tokens)}${maxTokens ? `/${compact(maxTokens)}` : ""}`.padEnd(10)}`,
    `$${cost.toFixed(4)}${maxCostUsd ? ` ${bar(cost, maxCostUsd)}` : ""}`,
  ];
  if (node.context) parts.push(contextBar(node.context.percent));
  if (node.tool)
    parts.push(
      `▸ ${visibleLine(node.tool)}${node.toolProgress ? ` ${progressLabel(node.toolProgress)}` : ""}`,
    );
  return parts.join("  ").trimEnd();
}

/** At most `room` of the tree's lines, around the picked agent, saying how many are out of view. */
function scrolled(
  tree: Array<{ node?: TreeNode; line: string }>,
  picked: TreeNode | undefined,
  room: number,
): string[] {
  const gutter = (row: { node?: TreeNode; line: string }) =>
    `${row.node !== undefined && row.node === picked ? inverse("›") : " "} ${row.line}`;
  if (tree.length <= room) return tree.map(gutter);
  const at = Math.max(
    0,
    tree.findIndex((row) => row.node === picked),
  );
  // The window around the picked row, less a line for each "more" marker it turns out to need.
  let shown = room;
  let start = 0;
  for (let pass = 0; pass < 3; pass++) {
    start = Math.min(Math.max(0, at - Math.floor(shown / 2)), tree.length - shown);
    shown = Math.max(1, room - (start > 0 ? 1 : 0) - (start + shown < tree.length ? 1 : 0));
  }
  start = Math.min(Math.max(0, at - Math.floor(shown / 2)), tree.length - shown);
  const below = tree.length - start - shown;
  return [
    ...(start ? [dim(`  ↑ ${start} more`)] : []),
    ...tree.slice(start, start + shown).map(gutter),
    ...(below ? [dim(`  ↓ ${below} more`)] : []),
  ].slice(0, room);
}

/**
 * The approval to answer: who wants what, its call id, paths, the first lines of the command or diff
 * quoted (its line count in the label), then why it is asked, on a line of its own below the text.
 */
function approvalPanel(
  pending: PendingApproval,
  count: number,
  requests: ShownRequests,
  shown: { width: number; detail?: number },
): string[] {
  const { node, callId } = pending;
  const of = count > 1 ? ` (1 of ${count} waiting)` : "";
  const shownAsEvent = node.approvals.get(callId);
  const record = requests.record({ runId: node.runId, agentId: node.agentId, callId });
  const request =
    record?.request ??
    (requests.watchOnly ? shownAsEvent && { ...shownAsEvent, tool: shownAsEvent.name } : undefined);
  const who = `${visibleLine(node.name)} wants`;
  if (!request)
    return [
      "",
      bold(`approval${of}: ${who} ${visibleLine(shownAsEvent?.name ?? "a tool")} (${visibleLine(callId)})`),
      dim("  reading the request…"),
    ];
  const text = requestText(request);
  const lines = quotedLines(text).flatMap((line) => wrapped(line, shown.width));
  const more = lines.length - (shown.detail ?? lines.length);
  const because = becauseLine(request);
  const keys = requests.watchOnly
    ? dim("  (watch only: this terminal cannot answer)")
    : more > 0
      ? `  [d] deny  ${yellow(`not all shown: see it whole with troupe approve ${visibleLine(callId)}`)}`
      : "  [a] allow  [d] deny";
  return [
    "",
    bold(`approval${of}: ${who} ${visibleLine(request.tool)} (${visibleLine(callId)})`),
    ...(request.paths.length ? [`  paths: ${request.paths.map(visibleLine).join(", ")}`] : []),
    `  ${textLabel(request, text)}:`,
    ...lines.slice(0, lines.length - Math.max(0, more)).map((line) => `  │ ${line}`),
    ...(more > 0 ? [dim(`  │ … ${more} more line${more === 1 ? "" : "s"} on this screen`)] : []),
    ...(because ? [yellow(`  ${because}`)] : []),
    keys,
  ];
}

/** The key `a` answers for a pending approval, when its request has been read. */
function allowKey(pending: PendingApproval, requests: ShownRequests): string | undefined {
  if (requests.watchOnly) return undefined;
  const ref = { runId: pending.node.runId, agentId: pending.node.agentId, callId: pending.callId };
  return requests.record(ref) ? approvalKey(ref) : undefined;
}

/** A line cut into pieces of at most `width` columns, none lost: what a panel shows of a long line. */
function wrapped(line: string, width: number): string[] {
  const pieces: string[] = [];
  let rest = line;
  while (rest.length > 0) {
    const piece = cliTruncate(rest, width, { truncationCharacter: "" }) || rest.slice(0, 1);
    pieces.push(piece);
    rest = rest.slice(piece.length);
  }
  return pieces.length ? pieces : [""];
}

/** Every pending approval in the view, in the order the tree shows them. */
export function pendingApprovals(builder: RunTreeBuilder): PendingApproval[] {
  const found: PendingApproval[] = [];
  const visit = (node: TreeNode) => {
    for (const callId of node.approvals.keys()) found.push({ node, callId });
    for (const child of node.children) visit(child);
  };
  for (const root of builder.roots()) visit(root);
  return found;
}

/** The agents in the order the tree shows them: what the arrow keys move through. */
export function agentOrder(builder: RunTreeBuilder): TreeNode[] {
  const order: TreeNode[] = [];
  const visit = (node: TreeNode) => {
    order.push(node);
    for (const child of node.children) visit(child);
  };
  for (const root of builder.roots()) visit(root);
  return order;
}

export const nodeKey = (node: TreeNode) => `${node.runId}/${node.agentId}`;

function pickedNode(builder: RunTreeBuilder, view: ViewState): TreeNode | undefined {
  return (view.selected === undefined ? undefined : builder.nodes.get(view.selected)) ?? view.speaker;
}

function bar(value: number, max: number | undefined, width = 10): string {
  if (!max) return "";
  const filled = Math.max(0, Math.min(width, Math.round((value / max) * width)));
  return `[${"█".repeat(filled)}${"░".repeat(width - filled)}] `;
}

/** The context's fill as a bar, yellow from the warning level, red from the critical one. */
export function contextBar(percent: number, paint = true): string {
  const text = `ctx ${bar(percent, 100).trimEnd()} ${percent}%`;
  if (!paint) return text;
  const level = contextLevel(percent);
  return level === "critical" ? red(text) : level === "warning" ? yellow(text) : text;
}

function compact(n: number): string {
  return n >= 10_000 ? `${Math.round(n / 1000)}k` : String(n);
}

/** The end of a text in `width` columns, starting at a word: what the agent is saying now. */
function tail(text: string, width: number): string {
  if (text.length <= width) return text;
  const cut = text.slice(-(width - 1));
  const space = cut.indexOf(" ");
  return `…${space >= 0 && space < 20 ? cut.slice(space + 1) : cut}`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

const tty = process.stdout.isTTY === true;
const sgr = (on: string, off: string) => (text: string) => (tty ? `\x1b[${on}m${text}\x1b[${off}m` : text);
const bold = sgr("1", "22");
const dim = sgr("2", "22");
const inverse = sgr("7", "27");
const yellow = sgr("33", "39");
const red = sgr("31", "39");
