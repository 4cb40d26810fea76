import { type Dirent, lstatSync, readdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { isInside } from "../util/paths.js";

/**
 * Names no sandboxed command may change at any depth of the workspace, compared without case (a
 * case-insensitive filesystem takes `.GIT` for `.git`): a repository's config and hooks run code
 * the next time anyone runs git there, and `.troupe/` holds Troupe's own settings and skills.
 */
const PROTECTED_NAMES = new Set([".git", ".troupe"]);

export function isProtectedName(name: string): boolean {
  return PROTECTED_NAMES.has(name.toLowerCase());
}

interface DirectoryEntry {
  mtimeMs: number;
  ino: number;
  /** Subdirectories to look into. */
  subdirs: string[];
  /** Protected entries found here, as real paths inside the workspace. */
  found: string[];
}

/**
 * Finds every protected entry of a workspace: `.git` directories, `.git` files (a worktree's or a
 * submodule's, which name where the repository is) and `.troupe`, at any depth, without following
 * symlinked directories; a protected name that is a symlink counts by its target when that is in
 * the workspace. A directory is read again only when its mtime or inode changed since the last
 * look (adding, removing or renaming an entry changes its directory's mtime), so a second look at
 * an unchanged tree costs one lstat per directory.
 */
export class ProtectedEntries {
  readonly #cache = new Map<string, DirectoryEntry>();

  /** `workspace` is a real path. */
  find(workspace: string): string[] {
    const found: string[] = [];
    const seen = new Set<string>();
    const stack = [workspace];
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      const entry = this.#look(workspace, dir);
      if (!entry) continue;
      seen.add(dir);
      found.push(...entry.found);
      stack.push(...entry.subdirs);
    }
    // Forget directories that are gone, so the cache does not outgrow the tree.
    for (const dir of this.#cache.keys())
      if (!seen.has(dir) && isInside(workspace, dir)) this.#cache.delete(dir);
    return [...new Set(found)];
  }

  #look(workspace: string, dir: string): DirectoryEntry | undefined {
    let info: ReturnType<typeof lstatSync>;
    try {
      info = lstatSync(dir);
    } catch {
      this.#cache.delete(dir);
      return undefined;
    }
    if (!info.isDirectory()) return undefined;
    const cached = this.#cache.get(dir);
    if (cached && cached.mtimeMs === info.mtimeMs && cached.ino === info.ino) return cached;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return undefined;
    }
    const entry: DirectoryEntry = { mtimeMs: info.mtimeMs, ino: info.ino, subdirs: [], found: [] };
    for (const child of entries) {
      const path = join(dir, child.name);
      if (isProtectedName(child.name)) {
        const target = child.isSymbolicLink() ? realPathInside(workspace, path) : path;
        if (target) entry.found.push(target);
      } else if (child.isDirectory()) {
        entry.subdirs.push(path);
      }
    }
    this.#cache.set(dir, entry);
    return entry;
  }
}

function realPathInside(workspace: string, path: string): string | undefined {
  try {
    const real = realpathSync(path);
    return isInside(workspace, real) ? real : undefined;
  } catch {
    return undefined;
  }
}
