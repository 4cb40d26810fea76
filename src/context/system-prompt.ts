import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentDefinition } from "../config/schema.js";

/** AGENTS.md files larger than this are cut, with a note. */
const MAX_AGENTS_MD = 32_000;

/**
 * The agent's system prompt: who it is, its own `systemPrompt`, and the workspace's AGENTS.md
 * (project instructions in the format Codex and others read).
 */
export function buildSystemPrompt(agent: AgentDefinition, workspace: string, extra: string[] = []): string {
  const parts = [`You are "${agent.name}", an agent run by Troupe. ${agent.description}`];
  if (agent.systemPrompt) parts.push(agent.systemPrompt.trim());
  const projectNotes = readAgentsMd(workspace);
  if (projectNotes) parts.push(`Project instructions from AGENTS.md in the workspace:\n${projectNotes}`);
  parts.push(...extra);
  return parts.join("\n\n");
}

function readAgentsMd(workspace: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(join(workspace, "AGENTS.md"), "utf8");
  } catch {
    return undefined;
  }
  text = text.trim();
  if (text.length > MAX_AGENTS_MD)
    text = `${text.slice(0, MAX_AGENTS_MD)}\n[AGENTS.md is longer; the rest was left out]`;
  return text || undefined;
}
