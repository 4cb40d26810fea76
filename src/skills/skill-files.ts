import { type Dirent, readdirSync, realpathSync } from "node:fs";
import { join } from "node:path";

/** How a read tool names a skill's own file: `skill:NAME/PATH`, PATH relative to the skill's dir. */
export const SKILL_PATH_PREFIX = "skill:";

export function isSkillPath(path: string): boolean {
  return path.startsWith(SKILL_PATH_PREFIX);
}

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
export function stillThere(dir: string): boolean {
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
