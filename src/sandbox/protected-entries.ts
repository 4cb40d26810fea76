import { type Dirent, lstatSync, readdirSync, readlinkSync, realpathSync, type Stats } from "node:fs";
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

export class WorkspaceScanError extends Error {
  override name = "WorkspaceScanError";
}

/** What a look at a workspace found. */
export interface WorkspaceEntries {
  /** Protected entries, as real paths inside the workspace (a symlinked one by its target). */
  protected: string[];
  /** Each protected entry as it was, `path → identity`: what `changedSince` compares against. */
  identities: Map<string, string>;
  /** Unix sockets: a read-only mount does not stop `connect()`, so they are covered. */
  sockets: string[];
  /** Directories this process cannot read: what is in them is unknown, so they are kept read-only. */
  unreadable: string[];
}

interface DirectoryEntry {
  /** mtime, ctime and inode: renaming, adding or removing an entry changes the first two; `touch -d` the second. */
  key: string;
  subdirs: string[];
  protected: Array<{ name: string; path: string }>;
  sockets: string[];
}

/**
 * Finds what a sandboxed command must not change or reach in a workspace: every `.git` (a directory,
 * or a worktree's or submodule's `.git` file) and `.troupe` at any depth, and every unix socket,
 * without following symlinked directories. A directory is read again only when its mtime, ctime or
 * inode changed since the last look, so a second look at an unchanged tree costs one lstat per
 * directory. A directory that cannot be read is reported, never skipped; a path that cannot even be
 * looked at (too long) fails the look, so a command never runs with a protected entry unprotected.
 */
export class ProtectedEntries {
  /** By workspace, then by directory. */
  readonly #caches = new Map<string, Map<string, DirectoryEntry>>();

  /** `workspace` is a real path. */
  find(workspace: string): WorkspaceEntries {
    const found: WorkspaceEntries = { protected: [], identities: new Map(), sockets: [], unreadable: [] };
    const cache = this.#caches.get(workspace) ?? new Map<string, DirectoryEntry>();
    this.#caches.set(workspace, cache);
    const seen = new Set<string>();
    const stack = [workspace];
    while (stack.length > 0) {
      const dir = stack.pop() as string;
      const entry = this.#look(cache, dir, found);
      if (!entry) continue;
      seen.add(dir);
      found.sockets.push(...entry.sockets);
      for (const { path } of entry.protected) {
        const identity = identityOf(path);
        if (identity === undefined) continue;
        const target = identity.startsWith("link:") ? realPathInside(workspace, path) : path;
        found.identities.set(path, identity);
        if (target) found.protected.push(target);
      }
      stack.push(...entry.subdirs);
    }
    // Forget directories that are gone, so the cache does not outgrow the tree.
    if (cache.size > seen.size) for (const dir of cache.keys()) if (!seen.has(dir)) cache.delete(dir);
    found.protected = [...new Set(found.protected)];
    return found;
  }

  /**
   * The protected entries that are new, or not what they were (another inode, a symlink retargeted),
   * since `before` was found: what a command made that could run code the next time git runs there.
   */
  changedSince(workspace: string, before: WorkspaceEntries): string[] {
    const after = this.find(workspace);
    return [...after.identities]
      .filter(([path, identity]) => before.identities.get(path) !== identity)
      .map(([path]) => path);
  }

  #look(
    cache: Map<string, DirectoryEntry>,
    dir: string,
    found: WorkspaceEntries,
  ): DirectoryEntry | undefined {
    let info: Stats;
    try {
      info = lstatSync(dir);
    } catch (error) {
      cache.delete(dir);
      return failed(dir, error, found);
    }
    if (!info.isDirectory()) return undefined;
    const key = `${info.mtimeMs}:${info.ctimeMs}:${info.ino}`;
    const cached = cache.get(dir);
    if (cached?.key === key) return cached;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch (error) {
      cache.delete(dir);
      return failed(dir, error, found);
    }
    const entry: DirectoryEntry = { key, subdirs: [], protected: [], sockets: [] };
    for (const child of entries) {
      const path = join(dir, child.name);
      if (isProtectedName(child.name)) entry.protected.push({ name: child.name, path });
      else if (child.isDirectory()) entry.subdirs.push(path);
      else if (child.isSocket()) entry.sockets.push(path);
    }
    cache.set(dir, entry);
    return entry;
  }
}

/** What a failed look means: gone (nothing to protect), unreadable (kept read-only), or a fault. */
function failed(dir: string, error: unknown, found: WorkspaceEntries): undefined {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return undefined;
  if (code === "EACCES" || code === "EPERM") {
    found.unreadable.push(dir);
    return undefined;
  }
  throw new WorkspaceScanError(`cannot look into ${dir} for .git directories (${code ?? String(error)})`);
}

/** A protected entry as it is now: `dev:ino` for a directory or file, `link:target` for a symlink. */
function identityOf(path: string): string | undefined {
  try {
    const info = lstatSync(path);
    return info.isSymbolicLink() ? `link:${readlinkSync(path)}` : `${info.dev}:${info.ino}`;
  } catch {
    return undefined;
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
