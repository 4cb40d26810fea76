import { mkdirSync, statSync } from "node:fs";
import { delimiter, isAbsolute, join, resolve } from "node:path";
import type { LoadedConfig } from "../../config/loaded.js";
import { envFilePath, readEnvFile } from "../../config/mcp-env-file.js";
import type { McpServerConfig } from "../../config/mcp-server-schema.js";
import { dataDir } from "../../config/paths.js";
import { UserError } from "../../errors.js";
import { findProgram, realPathSoFar } from "../../sandbox/launch-paths.js";
import { isInside, realPathOrUndefined } from "../../util/paths.js";

/** A stdio server Troupe will not start, and why: it would run what an agent may have written. */
export class McpLaunchRefusedError extends UserError {
  override name = "McpLaunchRefusedError";
  constructor(
    readonly server: string,
    /** Why, and how to mend it, in one line. */
    readonly why: string,
  ) {
    super(`MCP server "${server}" not started: ${why}`);
  }
}

/** Where the stdio servers of one runtime start, and what they may not come from. */
export interface LaunchScope {
  /** The run's workspace: what `${workspace}` stands for, and the one root the servers are told of. */
  workspace: string;
  /** Every directory an agent of this process may write: the workspace, and a daemon's `daemon.workspaces`. */
  writable: readonly string[];
  /** The config dir: where a server given without a file of its own (an inline config) is from. */
  configDir: string;
  /** An empty directory of Troupe's own, where a server starts whose config dir is inside a writable one. */
  spareDir: string;
}

/** How one stdio server is started. */
export interface Launch {
  /** The program, by the path it was found at. */
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd: string;
  /** PATH entries left out because an agent may write them. */
  leftOut: string[];
}

/** `${workspace}`, and VS Code's `${workspaceFolder}` (a pasted `.vscode/mcp.json`), in any value of an entry. */
const WORKSPACE_PLACEHOLDER = /\$\{(?:workspace|workspaceFolder)\}/g;

/** Variables that tell npm, npx and node where to find code and config: none may lead into a workspace. */
const CODE_PATH_VARIABLE = /^(npm_config_.*|NODE_PATH)$/i;

/**
 * The scope of a runtime (or of `troupe doctor`) on `workspace`: that workspace and the daemon's
 * `daemon.workspaces` are writable; the spare dir is `mcp` in the data dir, which no agent can reach.
 */
export function launchScope(config: LoadedConfig, workspace: string, env: NodeJS.ProcessEnv): LaunchScope {
  return {
    workspace,
    writable: [workspace, ...config.troupe.daemon.workspaces.map((root) => resolve(config.dir, root))],
    configDir: config.dir,
    spareDir: join(dataDir(config.troupe.dataDir, env), "mcp"),
  };
}

/** A scope with only the workspace writable, servers from the working directory: for a manager made in code. */
export function defaultLaunchScope(workspace: string, env: NodeJS.ProcessEnv = process.env): LaunchScope {
  return {
    workspace,
    writable: [workspace],
    configDir: process.cwd(),
    spareDir: join(dataDir(undefined, env), "mcp"),
  };
}

/**
 * How a stdio server is started, or `McpLaunchRefusedError`. Outside the sandbox nothing of it may
 * come from a place an agent may write, judged by real path: it starts in the directory of the file
 * that defined it (or its `cwd`), so npx, uv and the like resolve no package from a workspace; its PATH
 * keeps no workspace directory; its command, found on that PATH or relative to that directory, is
 * refused when it lies in one, and so is an npm or node search path leading into one. A server with
 * `sandbox:` runs where the sandbox puts it (in the workspace, which is all it can reach).
 */
export function planLaunch(
  server: string,
  config: McpServerConfig,
  scope: LaunchScope,
  inherited: Record<string, string>,
): Launch {
  const workspace = realPathOrUndefined(scope.workspace) ?? resolve(scope.workspace);
  const expand = (value: string) => value.replace(WORKSPACE_PLACEHOLDER, () => workspace);
  const writable = scope.writable.map(realPathSoFar);
  const writableHolding = (path: string) => writable.find((root) => isInside(root, realPathSoFar(path)));
  const confined = config.sandbox !== undefined;
  const refuse = (why: string): never => {
    throw new McpLaunchRefusedError(server, why);
  };

  const env: Record<string, string> = {
    ...inherited,
    ...envFile(config, scope, writableHolding, confined, refuse),
  };
  for (const [name, value] of Object.entries(config.env)) env[name] = expand(value);
  const cwd = workingDir(config, scope, expand, writableHolding, confined ? undefined : refuse);
  const path = (env.PATH ?? "").split(delimiter);
  const kept = path.filter((dir) => isAbsolute(dir) && writableHolding(dir) === undefined);
  env.PATH = kept.join(delimiter);
  const given = expand(config.command as string);
  const found = findProgram(given, cwd, kept);
  if (!confined) {
    const root = found === undefined ? undefined : writableHolding(found);
    if (found && root)
      refuse(
        `its command ${given} is ${realPathSoFar(found)}, inside ${root}, which agents may change; install it outside, or run the server in the sandbox (sandbox: read-only)`,
      );
    for (const [name, value] of Object.entries(env)) {
      if (!CODE_PATH_VARIABLE.test(name)) continue;
      const inside = value.split(delimiter).find((dir) => isAbsolute(dir) && writableHolding(dir));
      if (inside)
        refuse(
          `its ${name} (${inside}) leads into ${writableHolding(inside)}, which agents may change; point it elsewhere`,
        );
    }
  }
  return {
    // In the sandbox the command is found there, as a sandboxed command's is. Not found: spawn
    // says so (ENOENT, on the same PATH), and the server did not start.
    command: confined ? given : (found ?? given),
    args: config.args.map(expand),
    env,
    cwd,
    leftOut: path.filter((dir) => !kept.includes(dir)),
  };
}

/**
 * The variables of its `envFile`. Outside the sandbox the file may not lie where an agent may write:
 * a variable (`NODE_OPTIONS`) can make the server run any code.
 */
function envFile(
  config: McpServerConfig,
  scope: LaunchScope,
  writableHolding: (path: string) => string | undefined,
  confined: boolean,
  refuse: (why: string) => never,
): Record<string, string> {
  const path = envFilePath(config, scope.configDir);
  if (path === undefined) return {};
  const root = writableHolding(path);
  if (root && !confined)
    refuse(`its envFile ${path} is inside ${root}, which agents may change; keep it outside`);
  try {
    return readEnvFile(path);
  } catch (error) {
    return refuse(
      `its envFile ${path} cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); create it, or remove envFile from its entry`,
    );
  }
}

/**
 * Its `cwd` (relative to the directory of its file), else that directory, else (when that lies where
 * an agent may write: npm looks for a project from there upwards, into the workspace; or is no
 * directory, as a config given in code may say) the spare dir.
 */
function workingDir(
  config: McpServerConfig,
  scope: LaunchScope,
  expand: (value: string) => string,
  writableHolding: (path: string) => string | undefined,
  refuse: ((why: string) => never) | undefined,
): string {
  const home = resolve(config.dir ?? scope.configDir);
  if (config.cwd !== undefined) {
    const cwd = resolve(home, expand(config.cwd));
    const root = writableHolding(cwd);
    if (root && refuse)
      refuse(`its cwd ${cwd} is inside ${root}, which agents may change; name a directory outside it`);
    return cwd;
  }
  if (writableHolding(home) === undefined && isDirectory(home)) return home;
  const root = writableHolding(scope.spareDir);
  if (root && refuse)
    refuse(
      `its config dir ${home} is inside ${root}, which agents may change, and so is troupe's data dir: set cwd in its entry to a directory outside it`,
    );
  mkdirSync(scope.spareDir, { recursive: true, mode: 0o700 });
  return scope.spareDir;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
