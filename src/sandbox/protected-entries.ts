import { type Dirent, lstatSync, readdirSync, realpathSync, type Stats } from "node:fs";
import { join } from "node:path";
import { TroupeError } from "../errors.js";
import { isProtectedName, isRepositoryShape, LOADED_AT_ROOT } from "../safety/protected-paths.js";
import { isInside } from "../util/paths.js";
import { visibleBytes } from "../util/visible.js";

export class WorkspaceScanError extends TroupeError {
  override name = "WorkspaceScanError";
  constructor(
    readonly dir: string,
    message: string,
  ) {
    super(message);
  }
}

/** A protected entry: a `.git` or `.troupe` by name, or a directory git takes for a repository. */
export interface ProtectedEntry {
  path: string;
  kind: "named" | "repository";
}

/** What a look at a workspace found. */
export interface WorkspaceEntries {
  /** Protected entries, as real paths inside the workspace (a symlinked one by its target). */
  protected: string[];
  /** Each protected entry as it was, by path: what `changedSince` compares against. */
  identities: Map<string, { kind: ProtectedEntry["kind"]; identity: string }>;
  /** Unix sockets: a read-only mount does not stop `connect()`, so they are covered. */
  sockets: string[];
  /** Directories this process cannot read: what is in them is unknown, so they are kept read-only. */
  unreadable: string[];
  /** With `lenient`: the directories that could not be looked at, and why. */
  failures: Array<{ dir: string; why: string }>;
  /**
   * Directories beyond the walk's bound (`WALK_BOUND`), not looked into: what is in them is unknown
   * (a `.git`, a socket), so commands get them hidden, empty and read-only.
   */
  beyond: string[];
  /**
   * With `lenient`: directories and sockets whose names are not UTF-8 that hold, or are, something
   * protected. No string can name them (a mount needs one), so they are renamed before anything else.
   */
  unnamed: Buffer[];
}

/**
 * How far the walk goes: directories deeper than `depth` levels below the workspace, or whose path
 * is longer than `pathBytes` (PATH_MAX is 4096, and a mount needs room for bubblewrap's prefix), are
 * not looked into. A tree of 2,100 nested directories otherwise made every look fail.
 */
export const WALK_BOUND = { depth: 64, pathBytes: 3072 };

interface DirectoryEntry {
  /** mtime, ctime and inode: renaming, adding or removing an entry changes the first two; `touch -d` the second. */
  key: string;
  subdirs: string[];
  protected: ProtectedEntry[];
  /** Protected entries that are directories: walked for sockets only (a read-only mount does not stop `connect()`). */
  shielded: string[];
  sockets: string[];
  /** Directories and sockets whose names are not UTF-8, by their bytes: looked into at each find. */
  unnamed: Buffer[];
}

/**
 * Finds what a sandboxed command must not change or reach in a workspace: every `.git` (a directory,
 * or a worktree's or submodule's `.git` file) and `.troupe` at any depth, every directory shaped
 * like a repository (`HEAD`, `objects/`, `refs/`: git takes one for a git dir while it looks for a
 * repository, wherever its config says the work tree is), and every unix socket, inside protected
 * entries too, without following symlinked directories. A directory is read again only when its
 * mtime, ctime or inode changed since the last look, so a second look at an unchanged tree costs one
 * lstat per directory. The walk stops at `WALK_BOUND`: what is beyond is reported in `beyond`. A
 * directory that cannot be read is reported, never skipped; one that cannot be looked at otherwise
 * fails the look, or with `lenient` is reported in `failures`.
 */
export class ProtectedEntries {
  /** By workspace, then by directory. */
  readonly #caches = new Map<string, Map<string, DirectoryEntry>>();

  /** `workspace` is a real path. */
  find(workspace: string, { lenient = false } = {}): WorkspaceEntries {
    const found: WorkspaceEntries = {
      protected: [],
      identities: new Map(),
      sockets: [],
      unreadable: [],
      failures: [],
      beyond: [],
      unnamed: [],
    };
    const cache = this.#caches.get(workspace) ?? new Map<string, DirectoryEntry>();
    this.#caches.set(workspace, cache);
    const seen = new Set<string>();
    // `shielded`: inside a protected entry, where only sockets (and the bound) matter.
    const stack = [{ dir: workspace, depth: 0, shielded: false }];
    while (stack.length > 0) {
      const { dir, depth, shielded } = stack.pop() as (typeof stack)[number];
      if (depth > WALK_BOUND.depth || Buffer.byteLength(dir) > WALK_BOUND.pathBytes) {
        found.beyond.push(dir);
        continue;
      }
      let entry: DirectoryEntry | undefined;
      try {
        entry = this.#look(cache, dir, found);
      } catch (error) {
        if (!lenient || !(error instanceof WorkspaceScanError)) throw error;
        found.failures.push({ dir: error.dir, why: error.message });
      }
      if (!entry) continue;
      seen.add(dir);
      found.sockets.push(...entry.sockets);
      for (const path of entry.unnamed) this.#unnamed(path, depth, lenient, found);
      if (!shielded) this.#record(workspace, entry, found);
      const next = (dirs: string[], inside: boolean) =>
        dirs.map((sub) => ({ dir: sub, depth: depth + 1, shielded: inside }));
      stack.push(...next(entry.subdirs, shielded), ...next(entry.shielded, true));
    }
    for (const loaded of LOADED_AT_ROOT) {
      const path = join(workspace, loaded);
      const target = identityOf(path);
      if (target === undefined) continue;
      // Reached through a link (`config` -> a directory of the command's): the link is what is
      // watched and moved aside, since renaming what it leads to would act outside the name troupe loads.
      const link = firstLinkOnTheWay(workspace, loaded);
      const entry = link ?? path;
      const identity = link ? `${identityOf(link)}>${target}` : target;
      found.identities.set(entry, { kind: "named", identity });
      const real = link || target.startsWith("link:") ? realPathInside(workspace, path) : path;
      if (real) found.protected.push(real);
    }
    // Forget directories that are gone, so the cache does not outgrow the tree.
    if (cache.size > seen.size) for (const dir of cache.keys()) if (!seen.has(dir)) cache.delete(dir);
    found.protected = [...new Set(found.protected)];
    return found;
  }

  /**
   * A directory or socket no string can name: it is no matter while nothing protected is in it; else
   * a look before a command fails (the sandbox cannot cover what it cannot name), and one after it
   * reports it, to be renamed.
   */
  #unnamed(path: Buffer, depth: number, lenient: boolean, found: WorkspaceEntries): void {
    if (!holdsProtected(path, WALK_BOUND.depth - depth)) return;
    if (lenient) found.unnamed.push(path);
    else
      throw new WorkspaceScanError(
        visibleBytes(path),
        `${visibleBytes(path)} has a name that is not UTF-8 and holds a .git, a repository or a socket, which the sandbox cannot cover by name: rename or remove it`,
      );
  }

  /** A looked-at directory's protected entries, by real path and by what they are now. */
  #record(workspace: string, entry: DirectoryEntry, found: WorkspaceEntries): void {
    for (const { path, kind } of entry.protected) {
      const identity = identityOf(path);
      if (identity === undefined) continue;
      const target = identity.startsWith("link:") ? realPathInside(workspace, path) : path;
      found.identities.set(path, { kind, identity });
      if (target) found.protected.push(target);
    }
  }

  /**
   * The protected entries that are new, or not what they were (another inode, a symlink leading
   * elsewhere), since `before` was found: what a command made that could run code the next time git
   * runs there. The look does not stop at a directory it cannot read; those are in `failures`.
   */
  changedSince(
    workspace: string,
    before: WorkspaceEntries,
  ): { changed: ProtectedEntry[]; after: WorkspaceEntries } {
    const after = this.find(workspace, { lenient: true });
    const changed = [...after.identities]
      .filter(([path, now]) => before.identities.get(path)?.identity !== now.identity)
      .map(([path, { kind }]) => ({ path, kind }));
    return { changed, after };
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
    let entries: Dirent<Buffer>[];
    try {
      entries = readdirSync(dir, { withFileTypes: true, encoding: "buffer" });
    } catch (error) {
      cache.delete(dir);
      return failed(dir, error, found);
    }
    const entry: DirectoryEntry = { key, subdirs: [], protected: [], shielded: [], sockets: [], unnamed: [] };
    if (isRepositoryShape(entries.map((e) => e.name.toString("latin1"))))
      entry.protected.push({ path: dir, kind: "repository" });
    for (const child of entries) {
      const name = child.name.toString();
      if (!Buffer.from(name).equals(child.name)) {
        // Read as a string, the name would lead nowhere: kept by its bytes.
        if (child.isDirectory() || child.isSocket())
          entry.unnamed.push(Buffer.concat([Buffer.from(`${dir}/`), child.name]));
        continue;
      }
      const path = join(dir, name);
      if (isProtectedName(name)) {
        entry.protected.push({ path, kind: "named" });
        if (child.isDirectory()) entry.shielded.push(path);
      } else if (child.isDirectory()) entry.subdirs.push(path);
      else if (child.isSocket()) entry.sockets.push(path);
    }
    cache.set(dir, entry);
    return entry;
  }
}

/**
 * Whether a directory named by its bytes is, or holds within `depth` levels, a socket, a `.git` or
 * `.troupe`, or a directory git takes for a repository; what cannot be looked into counts as such.
 */
function holdsProtected(path: Buffer, depth: number): boolean {
  if (depth < 0) return true;
  let entries: Dirent<Buffer>[];
  try {
    if (lstatSync(path).isSocket()) return true;
    entries = readdirSync(path, { withFileTypes: true, encoding: "buffer" });
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== "ENOENT";
  }
  const names = entries.map((e) => e.name.toString("latin1"));
  if (isRepositoryShape(names) || names.some(isProtectedName)) return true;
  return entries.some(
    (e) =>
      e.isSocket() ||
      (e.isDirectory() && holdsProtected(Buffer.concat([path, Buffer.from("/"), e.name]), depth - 1)),
  );
}

/** The first symbolic link among the parents of `loaded` (relative to the workspace), if any. */
function firstLinkOnTheWay(workspace: string, loaded: string): string | undefined {
  const parts = loaded.split("/");
  let at = workspace;
  for (const part of parts.slice(0, -1)) {
    at = join(at, part);
    try {
      if (lstatSync(at).isSymbolicLink()) return at;
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** What a failed look means: gone (nothing to protect), unreadable (kept read-only), or a fault. */
function failed(dir: string, error: unknown, found: WorkspaceEntries): undefined {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return undefined;
  if (code === "EACCES" || code === "EPERM") {
    found.unreadable.push(dir);
    return undefined;
  }
  throw new WorkspaceScanError(
    dir,
    `cannot look into ${dir} for .git directories (${code ?? String(error)})`,
  );
}

/**
 * A protected entry as it is now: `dev:ino` for a directory or file, `link:` and where it leads in
 * the end for a symlink (a link whose text stays the same can lead elsewhere when a link it goes
 * through is changed).
 */
function identityOf(path: string): string | undefined {
  try {
    const info = lstatSync(path);
    if (!info.isSymbolicLink()) return `${info.dev}:${info.ino}`;
    try {
      return `link:${realpathSync(path)}`;
    } catch {
      return "link:dangling";
    }
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
