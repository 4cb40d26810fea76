/**
 * What no tool and no sandboxed command may change in a workspace, because something runs it later
 * outside any sandbox. One list for the write tools' guard and for the sandbox's mounts.
 */

/**
 * Names protected at any depth, compared without case (a case-insensitive filesystem takes `.GIT`
 * for `.git`): a repository's config and hooks run code the next time anyone runs git there, and
 * `.troupe/` holds Troupe's own settings and skills.
 */
const PROTECTED_NAMES = new Set([".git", ".troupe"]);

export function isProtectedName(name: string): boolean {
  return PROTECTED_NAMES.has(name.toLowerCase());
}

/**
 * Paths under the workspace root that Troupe itself loads when it is run there: `./config` is the
 * config dir when it holds a troupe.yaml, and a troupe.yaml can name JavaScript tool modules and
 * turn the approval policy to yolo.
 */
export const LOADED_AT_ROOT = ["config/troupe.yaml"];

/**
 * What makes a directory a git dir to git while it looks for a repository: a HEAD, objects and refs
 * side by side, or a HEAD and a `commondir` file, which names another directory for the objects,
 * refs and config (a linked worktree's git dir: git reads that config). Git follows links to each
 * (and takes an executable file for refs), so any entry of those names counts, whatever it is; a
 * directory of either shape is protected like a `.git`.
 */
export const REPOSITORY_PARTS = ["HEAD", "objects", "refs"] as const;
const LINKED_PARTS = ["HEAD", "commondir"] as const;

/** Whether entries of these names, side by side, make a directory git takes for a repository. */
export function isRepositoryShape(names: Iterable<string>): boolean {
  const present = new Set(names);
  const has = (parts: readonly string[]) => parts.every((part) => present.has(part));
  return has(REPOSITORY_PARTS) || has(LINKED_PARTS);
}
