import { spawnSync } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { TroupeError } from "../errors.js";
import { HostPlanner, type HostPlanRequest } from "./host-plan.js";
import { bwrapArgs } from "./plan.js";
import { seccompFilter } from "./seccomp.js";

const FILTER = seccompFilter();

/** What to do when the sandbox is missing, in one line. */
export const SANDBOX_INSTALL_HINT =
  "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap)";

/**
 * The operating system's sandbox for commands. Linux has bubblewrap; another platform (macOS's
 * sandbox-exec) would be another implementation of this interface.
 */
export interface Sandbox {
  /** Why commands cannot be confined here (and how to mend it), or undefined when they can. */
  readonly unavailable: string | undefined;
  /** What runs the sandbox, for `troupe doctor`: "bubblewrap 0.8.0 at /usr/bin/bwrap". */
  readonly description: string;
  /**
   * The program and arguments that run `command` confined as `request` says. With `filter: false`
   * there is no seccomp filter (for a launcher that cannot pass `inputs`, as an MCP stdio transport).
   */
  wrap(
    request: HostPlanRequest,
    command: readonly string[],
    options?: { filter?: boolean },
  ): SandboxedCommand;
}

export interface SandboxedCommand {
  file: string;
  args: string[];
  /** What the command must be given on file descriptors 3, 4, … (the seccomp filter). */
  inputs: Buffer[];
  /**
   * Once the command has ended: what it made that the sandbox could not stop, moved aside (a new
   * `.git` or `.troupe`, a `.git` symlink pointed elsewhere), from where to where.
   */
  settle(): Array<{ from: string; to: string }>;
  /**
   * Directories of the workspace too deep to look into, hidden from the command (empty, read-only);
   * once settled, those the next command will not see.
   */
  hidden(): string[];
}

export class SandboxUnavailableError extends TroupeError {
  override name = "SandboxUnavailableError";
}

class Bubblewrap implements Sandbox {
  readonly unavailable = undefined;
  readonly #planner = new HostPlanner();
  #description: string | undefined;

  constructor(private readonly path: string) {}

  /** Asked of bubblewrap only when wanted (`troupe doctor`), not at every start. */
  get description(): string {
    this.#description ??= `${
      spawnSync(this.path, ["--version"], { encoding: "utf8", timeout: 5000 }).stdout?.trim() || "bubblewrap"
    } at ${this.path}`;
    return this.#description;
  }

  wrap(request: HostPlanRequest, command: readonly string[], { filter = true } = {}): SandboxedCommand {
    const plan = this.#planner.plan(request);
    const seccomp = filter ? FILTER : undefined;
    return {
      file: this.path,
      args: bwrapArgs(seccomp ? { ...plan, seccompFd: 3 } : plan, command),
      inputs: seccomp ? [seccomp] : [],
      settle: () => this.#planner.settle(request.workspace, plan),
      hidden: () => plan.hidden,
    };
  }
}

/** A sandbox that cannot confine anything: commands must then be asked for. */
export function unavailableSandbox(why: string): Sandbox {
  return {
    unavailable: why,
    description: "none",
    wrap() {
      throw new SandboxUnavailableError(why);
    },
  };
}

let detected: Sandbox | undefined;

/**
 * This machine's sandbox, found once per process: bubblewrap from `TROUPE_BWRAP` or the process's
 * PATH, checked by running `true` under it with every namespace it will use (a kernel or a
 * container may forbid them).
 */
export function detectSandbox(): Sandbox {
  detected ??= detect(process.env);
  return detected;
}

function detect(env: NodeJS.ProcessEnv): Sandbox {
  if (process.platform !== "linux")
    return unavailableSandbox(`there is no command sandbox for ${process.platform} yet`);
  if (env.TROUPE_BWRAP && !isExecutable(env.TROUPE_BWRAP))
    return unavailableSandbox(`TROUPE_BWRAP=${env.TROUPE_BWRAP} is not a program: ${SANDBOX_INSTALL_HINT}`);
  const path = env.TROUPE_BWRAP || findOnPath("bwrap", env.PATH ?? "");
  if (!path) return unavailableSandbox(`bubblewrap (bwrap) is not installed: ${SANDBOX_INSTALL_HINT}`);
  const probe = spawnSync(
    path,
    bwrapArgs({ mounts: [{ kind: "read", path: "/" }], network: false, cwd: "/" }, ["true"]),
    { encoding: "utf8", timeout: 10_000, env: { PATH: env.PATH ?? "/usr/bin:/bin" } },
  );
  if (probe.status !== 0) {
    const said = (probe.stderr || probe.error?.message || `exit code ${probe.status}`).trim().split("\n")[0];
    return unavailableSandbox(
      `bubblewrap at ${path} cannot make a sandbox here (${said}); it needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 an AppArmor profile for bwrap)`,
    );
  }
  return new Bubblewrap(path);
}

/**
 * `name` in an absolute directory of PATH. A relative entry (`bin`, `.`, `node_modules/.bin`) would
 * be looked up from where Troupe runs, a cloned repository perhaps, whose own `bin/bwrap` would then
 * run every "sandboxed" command: it is skipped.
 */
function findOnPath(name: string, pathVariable: string): string | undefined {
  for (const dir of pathVariable.split(delimiter)) {
    if (!isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}
