/**
 * What a sandboxed command may see and touch, as data: an ordered list of mounts, the network, the
 * directory it starts in. `bwrapArgs` turns a plan into bubblewrap's arguments without touching the
 * machine, so the policy is tested without spawning anything; `src/sandbox/host-plan.ts` builds a
 * plan from the machine, and `src/sandbox/sandbox.ts` runs a command under it.
 */

import { SANDBOX_MODES } from "../config/policies.js";

export { SANDBOX_MODES };
/**
 * `read-only`: the system and the workspace read-only, a private HOME and /tmp, no network.
 * `workspace-write`: the same, with the workspace writable except every `.git`, `.troupe/` and the
 * config dir. `off`: no sandbox (only under yolo, or for a command the user approved to run so).
 */
export type SandboxMode = (typeof SANDBOX_MODES)[number];

/** How one command is confined: decided per call by the approval policy, carried to the tool. */
export interface Confinement {
  mode: SandboxMode;
  network: boolean;
}

/** The strictest confinement: what a command gets when nothing says otherwise. */
export const STRICTEST: Confinement = { mode: "read-only", network: false };

const OPENNESS: Readonly<Record<SandboxMode, number>> = { "read-only": 0, "workspace-write": 1, off: 2 };

/**
 * Why `confinement` gives a command more than `limit` allows (a more open mode, or the network the
 * limit does not have; no sandbox has the network), or undefined when it stays within it.
 */
export function beyond(confinement: Confinement, limit: Confinement): string | undefined {
  if (OPENNESS[confinement.mode] > OPENNESS[limit.mode])
    return confinement.mode === "off" ? "no sandbox" : `the ${confinement.mode} sandbox`;
  const network = confinement.network || confinement.mode === "off";
  if (network && !limit.network) return "network access";
  return undefined;
}

export type Mount =
  /** The host's `source` (default: the same path) at `path`, read-only. */
  | { kind: "read"; path: string; source?: string }
  /** The host's `path` at `path`, writable. */
  | { kind: "write"; path: string }
  | { kind: "symlink"; path: string; target: string }
  /** An empty private directory in memory; `readOnly` hides what is under it without giving a place to write. */
  | { kind: "tmpfs"; path: string; readOnly?: boolean }
  /** An empty directory on a tmpfs already mounted (a private HOME under the private /tmp). */
  | { kind: "dir"; path: string }
  /** A file replaced by an empty one: a secret the command must not read. */
  | { kind: "hide-file"; path: string };

export interface SandboxPlan {
  /** In order: a later mount covers an earlier one at or above its path. */
  mounts: Mount[];
  network: boolean;
  /** Where the command starts. */
  cwd: string;
  /** The file descriptor bubblewrap reads a seccomp filter from (see seccomp.ts); none without it. */
  seccompFd?: number;
}

/**
 * bubblewrap's arguments for a plan, then `--` and the command. Every namespace bubblewrap can make
 * is new (user, IPC, PID with a fresh /proc, UTS, cgroup, and the network unless the plan allows
 * it); every capability is dropped (as root, bubblewrap would otherwise keep them, and a command
 * could remount the workspace writable); /proc is read-only; the command gets a session of its own
 * (no TIOCSTI into the caller's terminal) and dies with its parent. The root is a private tmpfs, read-only once the
 * mounts are made, so nothing is visible that the plan does not mount.
 */
export function bwrapArgs(plan: SandboxPlan, command: readonly string[]): string[] {
  const args = [
    "--new-session",
    "--die-with-parent",
    "--unshare-user-try",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    ...(plan.network ? [] : ["--unshare-net"]),
    "--cap-drop",
    "ALL",
    ...(plan.seccompFd === undefined ? [] : ["--seccomp", String(plan.seccompFd)]),
  ];
  for (const mount of plan.mounts) {
    switch (mount.kind) {
      case "read":
        args.push("--ro-bind", mount.source ?? mount.path, mount.path);
        break;
      case "write":
        args.push("--bind", mount.path, mount.path);
        break;
      case "symlink":
        args.push("--symlink", mount.target, mount.path);
        break;
      case "tmpfs":
        args.push("--tmpfs", mount.path);
        if (mount.readOnly) args.push("--remount-ro", mount.path);
        break;
      case "dir":
        args.push("--dir", mount.path);
        break;
      case "hide-file":
        args.push("--ro-bind", "/dev/null", mount.path);
        break;
    }
  }
  // /proc read-only: as root, files such as /proc/sys/kernel/core_pattern are checked by uid alone,
  // and bubblewrap leaves /proc/sys writable (it covers it only when the directory itself is).
  args.push("--dev", "/dev", "--proc", "/proc", "--remount-ro", "/proc", "--remount-ro", "/");
  args.push("--chdir", plan.cwd, "--", ...command);
  return args;
}
