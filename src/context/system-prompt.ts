import { join } from "node:path";
import type { AgentDefinition } from "../config/agent-schema.js";
import { type NoteOptions, noteStamp, readNoteSync, skippedNote } from "../safety/note-read.js";
import { realPathOrUndefined } from "../util/paths.js";

/** AGENTS.md files larger than this are cut, with a note. */
const MAX_AGENTS_MD = 32_000;
/** Bytes read of AGENTS.md at most: enough for MAX_AGENTS_MD characters of any UTF-8. */
const MAX_AGENTS_MD_BYTES = MAX_AGENTS_MD * 4;

/** How project notes may be read: `sandbox.readHardLinks` and the hidden data dir. */
export type NotesOptions = Pick<NoteOptions, "readHardLinks" | "hiddenDirs">;

/**
 * The agent's system prompt: who it is, its own `systemPrompt`, and the workspace's AGENTS.md
 * (project instructions in the format Codex and others read), or one line saying why it was skipped.
 */
export function buildSystemPrompt(
  agent: AgentDefinition,
  workspace: string,
  extra: string[] = [],
  notes: NotesOptions = {},
): string {
  const parts = [`You are "${agent.name}", an agent run by Troupe. ${agent.description}`];
  if (agent.systemPrompt) parts.push(agent.systemPrompt.trim());
  const projectNotes = readAgentsMd(workspace, notes);
  if (projectNotes) parts.push(projectNotes);
  parts.push(...extra);
  return parts.join("\n\n");
}

/** AGENTS.md as last read, by path: read again when its size, times, inode or links change. */
const agentsMdCache = new Map<string, { stamp: string; text: string | undefined }>();

/**
 * Every agent start asks for it, so it is looked up with an lstat that does not throw when the file
 * is missing (a thrown ENOENT cost more than the rest of the prompt) and read only when it changed.
 * An agent (or a cloned repository) may have made it: it is read as a project note (`readNoteSync`).
 */
function readAgentsMd(workspace: string, notes: NotesOptions): string | undefined {
  const root = realPathOrUndefined(workspace);
  if (root === undefined) return undefined;
  const path = join(root, "AGENTS.md");
  const stamp = noteStamp(path);
  const cached = agentsMdCache.get(path);
  if (stamp !== undefined && cached?.stamp === stamp) return cached.text;
  const note = readNoteSync(path, { ...notes, within: root, cap: MAX_AGENTS_MD_BYTES });
  if ("refused" in note) {
    agentsMdCache.delete(path);
    return note.refused === "missing" ? undefined : skippedNote("AGENTS.md", note);
  }
  const text = instructions(note.bytes.toString("utf8"), note.cut);
  agentsMdCache.set(path, { stamp: note.stamp, text });
  return text;
}

function instructions(raw: string, cut: boolean): string | undefined {
  let text = raw.trim();
  if (text.length > MAX_AGENTS_MD || cut)
    text = `${text.slice(0, MAX_AGENTS_MD)}\n[AGENTS.md is longer; the rest was left out]`;
  return text ? `Project instructions from AGENTS.md in the workspace:\n${text}` : undefined;
}
