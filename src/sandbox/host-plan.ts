import { existsSync, lstatSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { isInside as inside } from "../util/paths.js";
import type { Mount, SandboxPlan } from "./plan.js";
import { ProtectedEntries } from "./protected-entries.js";

export class SandboxPlanError extends Error {
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

/**
 * Builds sandbox plans from what is on this machine. The system part is looked up once; the
 * protected entries of a workspace (every `.git` and `.troupe` at any depth) on every plan, from a
 * cache that re-reads only the directories that changed.
 */
export class HostPlanner {
  #system: Mount[] | undefined;
  readonly #protected = new ProtectedEntries();

  plan(request: HostPlanRequest): SandboxPlan {
    const workspace = realpathSync(request.workspace);
    if (workspace === sep)
      throw new SandboxPlanError("the workspace is the root directory: nothing is outside it");
    const cwd = request.cwd ? realpathSync(request.cwd) : workspace;
    const extra = (request.readPaths ?? [])
      .filter((path) => existsSync(path))
      .map((path) => realpathSync(path));
    const mounts: Mount[] = [
      ...this.#systemMounts(),
      ...extra.map((path): Mount => ({ kind: "read", path })),
    ];
    const mounted = [...SYSTEM_PATHS, ...extra, workspace];
    if (request.network) {
      // A resolv.conf that links elsewhere (systemd-resolved's, under /run) must be there to resolve names.
      const resolvConf = existingRealPath("/etc/resolv.conf");
      if (resolvConf && !mounted.some((root) => inside(root, resolvConf)))
        mounts.push({ kind: "read", path: resolvConf });
    }
    mounts.push({ kind: "tmpfs", path: "/tmp" }, { kind: "dir", path: SANDBOX_HOME });
    if (request.mode === "workspace-write") {
      mounts.push({ kind: "write", path: workspace });
      for (const path of this.#protected.find(workspace)) mounts.push({ kind: "read", path });
      for (const dir of request.protectedDirs ?? []) {
        const real = existingRealPath(dir);
        if (real && inside(workspace, real)) mounts.push({ kind: "read", path: real });
      }
    } else {
      mounts.push({ kind: "read", path: workspace });
    }
    for (const dir of request.hiddenDirs ?? []) {
      const real = existingRealPath(dir);
      if (real && mounted.some((root) => inside(root, real)))
        mounts.push({ kind: "tmpfs", path: real, readOnly: true });
    }
    return { mounts, network: request.network, cwd };
  }

  /** The system paths this machine has (merged-/usr links as links), with their secrets hidden. */
  #systemMounts(): Mount[] {
    if (this.#system) return this.#system;
    const mounts: Mount[] = [];
    const roots = [...SYSTEM_PATHS];
    // Node installed elsewhere (nvm, a tarball under HOME) still runs inside: its prefix is mounted.
    const nodePrefix = dirname(dirname(realpathSync(process.execPath)));
    if (!roots.some((root) => inside(root, nodePrefix))) roots.push(nodePrefix);
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

function existingRealPath(path: string): string | undefined {
  try {
    return realpathSync(resolve(path));
  } catch {
    return undefined;
  }
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function readdirOrEmpty(path: string): string[] {
  try {
    return readdirSync(path);
  } catch {
    return [];
  }
}
