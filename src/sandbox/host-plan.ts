import { lstatSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join, sep } from "node:path";
import { TroupeError } from "../errors.js";
import { isInside as inside, lstatOrUndefined, realPathOrUndefined } from "../util/paths.js";
import { visibleBytes } from "../util/visible.js";
import type { Mount, SandboxPlan } from "./plan.js";
import { ProtectedEntries, type WorkspaceEntries } from "./protected-entries.js";
import { openUp, quarantine, renameUnnamed } from "./quarantine.js";

export class SandboxPlanError extends TroupeError {
  override name = "SandboxPlanError";
}

/** What a command needs of the system to run, mounted read-only: an allow-list, not the whole disk. */
const SYSTEM_PATHS = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt"];

/** Files under the system paths that hold secrets: each is replaced by an empty one. */
const SECRET_FILES = [
  "/etc/shadow",
  "/etc/shadow-",
  "/etc/gshadow",
  "/etc/gshadow-",
  "/etc/security/opasswd",
  "/etc/krb5.keytab",
  "/etc/ipsec.secrets",
  "/etc/ppp/chap-secrets",
  "/etc/ppp/pap-secrets",
];
/** Directories under the system paths that hold secrets: each is replaced by an empty read-only one. */
const SECRET_DIRS = [
  "/etc/ssl/private",
  "/etc/NetworkManager/system-connections",
  "/etc/wireguard",
  "/etc/credstore",
  "/etc/credstore.encrypted",
  "/etc/libvirt/secrets",
];
/** The SSH host keys: private, unlike the `.pub` beside them. */
const SSH_HOST_KEY = /^ssh_host_.*_key$/;

/** HOME inside the sandbox: an empty directory on its private /tmp. */
export const SANDBOX_HOME = "/tmp/home";

export interface HostPlanRequest {
  mode: "read-only" | "workspace-write";
  network: boolean;
  workspace: string;
  /** Where the command starts; default the workspace. */
  cwd?: string;
  /** Directories no command may change, even in workspace-write (the config dir). */
  protectedDirs?: readonly string[];
  /** Directories no command may see (the data dir, with its credentials and run logs). */
  hiddenDirs?: readonly string[];
  /** More paths to mount read-only (`sandbox.readPaths` in troupe.yaml: a toolchain elsewhere). */
  readPaths?: readonly string[];
}

/** A plan, and what the workspace held when it was made (for `HostPlanner.settle`). */
export interface HostPlan extends SandboxPlan {
  entries?: WorkspaceEntries;
  /** Directories of the workspace beyond the walk's bound, hidden from the command; after `settle`, from the look after it. */
  hidden: string[];
}

/**
 * Builds sandbox plans from what is on this machine. The system part is looked up once; the
 * protected entries of a workspace (every `.git` and `.troupe` at any depth) on every plan, from a
 * cache that re-reads only the directories that changed.
 *
 * A read-only bind mount protects a path, not a name: a command could move the directory above a
 * `.git` away and make a new one in its place. So every directory between the workspace and a
 * protected, hidden or covered path is bound onto itself, writable: a mount point cannot be renamed
 * or removed, and its contents stay writable.
 */
export class HostPlanner {
  #system: Mount[] | undefined;
  readonly #protected = new ProtectedEntries();
  /** Workspaces a command left something in that could not be settled, and what. */
  readonly #held = new Map<string, string[]>();

  plan(request: HostPlanRequest): HostPlan {
    const workspace = realpathSync(request.workspace);
    refuseWorkspace(workspace);
    const held = this.#held.get(workspace)?.filter(exists);
    if (held?.length)
      throw new SandboxPlanError(
        `an earlier command left ${held.join(", ")}, which Troupe could not check or move aside: remove it, then go on`,
      );
    this.#held.delete(workspace);
    const cwd = request.cwd ? realpathSync(request.cwd) : workspace;
    const extra = (request.readPaths ?? [])
      .map(realPathOrUndefined)
      .filter((path): path is string => path !== undefined);
    for (const path of extra) {
      const why = tooWide(path);
      if (why) throw new SandboxPlanError(`sandbox.readPaths: ${path} ${why}; name a directory of its own`);
    }
    // The private /tmp first: a read path or node's own dir may be under the host's /tmp.
    const mounts: Mount[] = [
      { kind: "tmpfs", path: "/tmp" },
      { kind: "dir", path: SANDBOX_HOME },
      ...this.#systemMounts(),
      ...extra.map((path): Mount => ({ kind: "read", path })),
    ];
    if (request.network) {
      // A resolv.conf that links elsewhere (systemd-resolved's, under /run) must be there to resolve names.
      const resolvConf = realPathOrUndefined("/etc/resolv.conf");
      if (resolvConf && !visible(mounts, resolvConf)) mounts.push({ kind: "read", path: resolvConf });
    }
    const writable = request.mode === "workspace-write";
    mounts.push({ kind: writable ? "write" : "read", path: workspace });
    // Looked at in read-only mode too: sockets can be connected to through a read-only mount.
    const entries = this.#protected.find(workspace);
    const covered: Mount[] = [];
    if (writable) {
      for (const path of [...entries.protected, ...entries.unreadable]) covered.push({ kind: "read", path });
      for (const dir of request.protectedDirs ?? []) {
        const real = realPathOrUndefined(dir);
        if (real && inside(workspace, real)) covered.push({ kind: "read", path: real });
      }
    }
    // Beyond the walk's bound nothing is known (a .git, a socket): hidden, empty and read-only.
    for (const path of entries.beyond) covered.push({ kind: "tmpfs", path, readOnly: true });
    for (const path of entries.sockets) covered.push({ kind: "hide-file", path });
    for (const dir of request.hiddenDirs ?? []) {
      const real = realPathOrUndefined(dir);
      if (!real || !visible(mounts, real)) continue;
      // A directory is replaced by an empty one, a file (a seed, a key) by an empty file.
      if (lstatOrUndefined(real)?.isDirectory()) covered.push({ kind: "tmpfs", path: real, readOnly: true });
      else covered.push({ kind: "hide-file", path: real });
    }
    if (writable) mounts.push(...pinnedAncestors(workspace, covered));
    mounts.push(...covered);
    return {
      mounts,
      network: request.network,
      cwd,
      hidden: entries.beyond,
      ...(writable ? { entries } : {}),
    };
  }

  /**
   * After a workspace-write command: every protected entry it made or replaced (a new `.git` or
   * `.troupe`, a directory shaped like a repository, a `.git` symlink leading elsewhere, a
   * config/troupe.yaml) is moved out of git's way (see `quarantine`), so git or troupe run there
   * later, outside the sandbox, finds nothing the command planted. Returns what was moved. When
   * something cannot be checked (a directory it made unreadable or too deep to look into) or moved,
   * the workspace is held: this throws, and so does every plan for it until that is gone.
   */
  settle(workspace: string, plan: HostPlan): Array<{ from: string; to: string }> {
    if (!plan.entries) return [];
    const real = realpathSync(workspace);
    const before = plan.entries;
    const closedBy = (after: WorkspaceEntries) =>
      after.unreadable.filter((dir) => !before.unreadable.includes(dir));
    let { changed, after } = this.#protected.changedSince(real, before);
    const moved: Array<{ from: string; to: string }> = [];
    const held: Array<{ path: string; why: string }> = [];
    if (after.unnamed.length > 0) {
      // What no string names is renamed first, then looked into like the rest.
      for (const path of after.unnamed) {
        try {
          moved.push(renameUnnamed(path));
        } catch (error) {
          held.push({ path: visibleBytes(path), why: (error as Error).message });
        }
      }
      ({ changed, after } = this.#protected.changedSince(real, before));
    }
    if (closedBy(after).length > 0) {
      // A directory the command made unreadable may hide a .git: opened up, and looked at again.
      for (const dir of closedBy(after)) openUp(dir);
      ({ changed, after } = this.#protected.changedSince(real, before));
    }
    plan.hidden = after.beyond;
    held.push(
      ...after.failures.map(({ dir, why }) => ({ path: dir, why })),
      ...closedBy(after).map((dir) => ({ path: dir, why: `${dir} cannot be read` })),
    );
    for (const entry of changed) {
      try {
        moved.push(quarantine(entry));
      } catch (error) {
        held.push({ path: entry.path, why: (error as Error).message });
      }
    }
    if (held.length > 0) {
      this.#held.set(
        real,
        held.map(({ path }) => path),
      );
      throw new SandboxPlanError(
        `the command left what could run code outside the sandbox, and Troupe could not move it aside (${held.map(({ why }) => why).join("; ")}): remove it; until then no command runs in ${real}`,
      );
    }
    return moved;
  }

  /** The system paths this machine has (merged-/usr links as links), with their secrets hidden. */
  #systemMounts(): Mount[] {
    if (this.#system) return this.#system;
    const mounts: Mount[] = [];
    const roots = [...SYSTEM_PATHS];
    // Node installed elsewhere (nvm, a tarball under HOME) still runs inside: its bin and lib are
    // mounted, not its whole prefix (for ~/bin/node that would be the home directory).
    const nodeBin = dirname(realpathSync(process.execPath));
    for (const path of [nodeBin, join(dirname(nodeBin), "lib")])
      if (!roots.some((root) => inside(root, path)) && dirname(nodeBin) !== sep) roots.push(path);
    for (const path of roots) {
      const info = lstatOrUndefined(path);
      if (info?.isSymbolicLink()) mounts.push({ kind: "symlink", path, target: readlinkSync(path) });
      else if (info?.isDirectory()) mounts.push({ kind: "read", path });
    }
    for (const path of SECRET_FILES)
      if (lstatOrUndefined(path)?.isFile()) mounts.push({ kind: "hide-file", path });
    for (const path of SECRET_DIRS)
      if (lstatOrUndefined(path)?.isDirectory()) mounts.push({ kind: "tmpfs", path, readOnly: true });
    for (const name of readdirOrEmpty("/etc/ssh"))
      if (SSH_HOST_KEY.test(name)) mounts.push({ kind: "hide-file", path: join("/etc/ssh", name) });
    this.#system = mounts;
    return mounts;
  }
}

function readdirOrEmpty(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return [];
  }
}

/** Where no sandbox can do its job: the whole disk, the home directory, or the sandbox's own /tmp. */
function refuseWorkspace(workspace: string): void {
  const why = tooWide(workspace);
  if (why) throw new SandboxPlanError(`the workspace ${workspace} ${why}; run troupe in a project directory`);
}

/** A path that would show a sandboxed command too much, mounted whole: why, or undefined. */
function tooWide(path: string): string | undefined {
  if (path === sep) return "is the root directory: nothing is outside it";
  if (inside(path, realPathOrUndefined(homedir()) ?? homedir()))
    return `holds the home directory ${homedir()}, whose dotfiles run code outside the sandbox`;
  if (inside(path, realPathOrUndefined(tmpdir()) ?? tmpdir()) || inside(path, "/tmp"))
    return "holds /tmp, which the sandbox replaces with its own";
  return undefined;
}

/** Whether a mount of the plan shows `path` (so hiding it means something). */
function visible(mounts: readonly Mount[], path: string): boolean {
  return mounts.some(
    (mount) => (mount.kind === "read" || mount.kind === "write") && inside(mount.path, path),
  );
}

/** Each directory strictly between the workspace and a covered path, bound onto itself, shallowest first. */
function pinnedAncestors(workspace: string, covered: readonly Mount[]): Mount[] {
  const dirs = new Set<string>();
  for (const { path } of covered) {
    if (!inside(workspace, path)) continue;
    for (let dir = dirname(path); dir !== workspace && inside(workspace, dir); dir = dirname(dir))
      dirs.add(dir);
  }
  return [...dirs].sort((a, b) => a.length - b.length).map((path): Mount => ({ kind: "write", path }));
}

/**
 * Whether `path` may still be there: only "no such file", for it or for a directory above it, says
 * it is gone (a path too long to look at is not known to be gone).
 */
function exists(path: string): boolean {
  const above = [];
  for (let dir = path; dirname(dir) !== dir; dir = dirname(dir)) above.unshift(dir);
  for (const dir of above) {
    try {
      lstatSync(dir);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT" || code === "ENOTDIR") return false;
    }
  }
  return true;
}
