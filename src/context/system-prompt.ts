import { readFileSync, statSync } from "node:fs";
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

/** AGENTS.md as last read, by path: read again when its size or times change. */
const agentsMdCache = new Map<string, { stamp: string; text: string | undefined }>();

/**
 * Every agent start asks for it, so it is looked up with a stat that does not throw when the file
 * is missing (a thrown ENOENT cost more than the rest of the prompt) and read only when it changed.
 */
function readAgentsMd(workspace: string): string | undefined {
  const path = join(workspace, "AGENTS.md");
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat?.isFile()) {
    agentsMdCache.delete(path);
    return undefined;
  }
  const stamp = `${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}:${stat.ino}`;
  const cached = agentsMdCache.get(path);
  if (cached?.stamp === stamp) return cached.text;
  let text: string | undefined;
  try {
    text = trimmed(readFileSync(path, "utf8"));
  } catch {
    text = undefined;
  }
  agentsMdCache.set(path, { stamp, text });
  return text;
}

function trimmed(raw: string): string | undefined {
  let text = raw.trim();
  if (text.length > MAX_AGENTS_MD)
    text = `${text.slice(0, MAX_AGENTS_MD)}\n[AGENTS.md is longer; the rest was left out]`;
  return text || undefined;
}
