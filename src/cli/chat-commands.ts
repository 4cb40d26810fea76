/* The `/` commands of `troupe chat`, and what /cost and /agents print. */
import type { RunTreeBuilder, TreeNode } from "../actors/run-tree.js";
import { didYouMean } from "../util/did-you-mean.js";
import { visibleLine } from "../util/visible.js";
import { agentOrder } from "./tree-view.js";

/** Each command with what /help says of it. */
export const CHAT_COMMANDS = {
  "/help": "these commands",
  "/steer": "TEXT: tell the agent TEXT after its current tool batch (while a turn runs)",
  "/abort": "stop the turn going on; the run stays, and the next line goes on with it",
  "/compact": "compact the conversation now: all but its last turn summarised (between turns)",
  "/cost": "tokens and cost so far: the run's, and each agent's",
  "/agents": "the run's agents, as a tree, with their states",
  "/approval": "POLICY: the approval policy of the next turns (never-ask, auto-edit, ask, yolo)",
  "/model": "NAME: the next turns on this model (one troupe.yaml or an agent names)",
  "/exit": "leave (the run stays: troupe chat --continue RUN goes on with it)",
} as const;

export type ChatCommand = keyof typeof CHAT_COMMANDS;

/** A line that starts with `/`: the command and the rest, or what to say of a command there is none of. */
export function parseCommand(line: string): { command: ChatCommand; rest: string } | { unknown: string } {
  const [word = "", ...rest] = line.trim().split(/\s+/);
  const name = word.toLowerCase();
  if (name in CHAT_COMMANDS) return { command: name as ChatCommand, rest: rest.join(" ") };
  return {
    unknown: `unknown command ${visibleLine(word)}${didYouMean(name, Object.keys(CHAT_COMMANDS))}: /help lists them`,
  };
}

/** /help: every command, one a line. */
export function helpText(): string {
  const width = Math.max(...Object.keys(CHAT_COMMANDS).map((name) => name.length));
  const lines = Object.entries(CHAT_COMMANDS).map(([name, what]) => `  ${name.padEnd(width)}  ${what}`);
  return [
    ...lines,
    "  A line ending in \\ goes on on the next. Ctrl-C stops a turn; at an empty prompt, it leaves",
    "  (as Ctrl-D does). A line typed while a turn runs steers it, or answers the question open then.",
  ].join("\n");
}

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;
const tokens = (node: TreeNode) => (node.usage?.inputTokens ?? 0) + (node.usage?.outputTokens ?? 0);
const dollars = (node: TreeNode) => `$${(node.usage?.costUsd ?? 0).toFixed(4)}`;
const label = (node: TreeNode) =>
  `${"  ".repeat(node.depth)}${visibleLine(node.name)} (${visibleLine(node.agentId)})`;

/** /cost: what the run spent (its first agent with its subagents), then each agent with its own subagents. */
export function costText(tree: RunTreeBuilder, runId: string | undefined): string {
  const agents = agentOrder(tree).filter((node) => node.runId === runId);
  const root = agents[0];
  if (!root) return "nothing spent yet: the run starts with the first line";
  const { inputTokens = 0, outputTokens = 0, cachedInputTokens = 0 } = root.usage ?? {};
  return [
    `run ${visibleLine(root.runId)}: ${tokens(root)} tokens (${inputTokens} in, ${cachedInputTokens} of them cached, ${outputTokens} out), ${dollars(root)}`,
    ...agents.map((node) => `  ${label(node)}: ${tokens(node)} tokens, ${dollars(node)}`),
  ].join("\n");
}

/** /agents: the run's agents as a tree, each with its state (and why it stopped, once it has). */
export function agentsText(tree: RunTreeBuilder, runId: string | undefined): string {
  const agents = agentOrder(tree).filter((node) => node.runId === runId);
  if (agents.length === 0) return "no agents yet: the run starts with the first line";
  return agents
    .map((node) => {
      const state = node.reason ? `stopped (${visibleLine(node.reason)})` : visibleLine(node.state);
      const tool = node.tool ? `, running ${visibleLine(node.tool)}` : "";
      return `  ${label(node)}: ${state}${tool}, ${count(node.turns, "turn")}, ${count(node.toolCalls, "tool call")}`;
    })
    .join("\n");
}
