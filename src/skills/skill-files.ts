import { type Dirent, readdirSync, realpathSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { isRefusal, openConfined } from "../safety/confined-read.js";
import { refusalError } from "../tools/builtin/guarded.js";
import { type ToolContext, type ToolResult, toolError } from "../tools/tool.js";

/** Files a skill discloses at most; the rest are not listed (and still readable by path). */
const MAX_LISTED = 200;
const MAX_DEPTH = 4;

/**
 * The other files of a skill with a directory (`references/`, `scripts/`, templates…), relative to it,
 * sorted: regular files only, SKILL.md itself, dot files and symbolic links left out (a link is not
 * followed here; read through one, it is judged where it leads).
 */
export function skillFiles(skill: { dir?: string }): string[] {
  if (!skill.dir || !stillThere(skill.dir)) return [];
  const found: string[] = [];
  const walk = (dir: string, prefix: string, depth: number) => {
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (found.length >= MAX_LISTED) return;
      if (entry.name.startsWith(".")) continue;
      const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
      if (entry.isDirectory() && depth < MAX_DEPTH) walk(join(dir, entry.name), relative, depth + 1);
      else if (entry.isFile() && relative !== "SKILL.md") found.push(relative);
    }
  };
  walk(skill.dir, "", 0);
  return found;
}

/** A skill's dir (a real path when found) still resolves to itself: no link on the way was swapped since. */
function stillThere(dir: string): boolean {
  try {
    return realpathSync(dir) === dir;
  } catch {
    return false;
  }
}

/** `skill:NAME/PATH` split, or why it is not one: no `..`, `.` or empty segments, nothing absolute. */
export function parseSkillPath(path: string): { name: string; relative: string } | { problem: string } {
  const match = /^skill:([a-z0-9][a-z0-9_-]*)\/(.+)$/.exec(path);
  if (!match) return { problem: `"${path}" is not a skill file path (skill:NAME/PATH)` };
  const name = match[1] as string;
  const relative = match[2] as string;
  const segments = relative.split("/");
  if (
    segments.some((segment) => segment === "" || segment === "." || segment === "..") ||
    relative.includes("\0")
  )
    return { problem: `"${path}" must name a file inside the skill, without "..", "." or empty parts` };
  // What a skill discloses is what its listing shows: no hidden file (a .env, a .git) is in it.
  if (segments.some((segment) => segment.startsWith(".")))
    return { problem: `"${path}" names a hidden file, which a skill does not disclose` };
  return { name, relative };
}

/**
 * Opens a skill's own file, `skill:NAME/PATH`, for reading: only a skill this agent may load
 * (`context.skillDirs`, real paths from when the skills were found), and only a file inside that
 * skill's directory, judged where it is opened
 * (its real path, no symbolic link out, the descriptor checked again) as workspace reads are. Outside
 * the workspace guard's scope, and read-only: no tool writes here.
 */
export async function openSkillFile(
  context: Pick<ToolContext, "skillDirs" | "readHardLinks" | "hiddenDirs">,
  path: string,
): Promise<FileHandle | ToolResult> {
  const parsed = parseSkillPath(path);
  if ("problem" in parsed)
    return toolError(parsed.problem, "use a path exactly as the loaded skill lists it");
  const dir = context.skillDirs?.get(parsed.name);
  if (!dir) {
    const names = [...(context.skillDirs?.keys() ?? [])];
    return toolError(
      `no skill "${parsed.name}" with files that this agent may load`,
      `read the files of one of: ${names.join(", ") || "(none)"}`,
    );
  }
  // Judged against where the skill was found, never where its path leads now.
  if (!stillThere(dir)) return toolError(`the skill "${parsed.name}" is gone`, "do without it");
  const handle = await openConfined(dir, join(dir, parsed.relative), {
    readHardLinks: context.readHardLinks,
    hiddenDirs: context.hiddenDirs,
  });
  if (!isRefusal(handle)) return handle;
  if (handle.refused === "outside")
    return toolError(
      `"${path}" leads outside the skill's directory`,
      "read only the files the loaded skill lists",
    );
  return refusalError(handle, path);
}
