import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import type { LoadedConfig } from "../config/load.js";
import { dataDir, userConfigDir } from "../config/paths.js";
import { isInside, realPathOrUndefined } from "../util/paths.js";
import { privateDir } from "../util/secret-files.js";
import { sandboxEnv } from "./env.js";
import type { HostPlanRequest } from "./host-plan.js";
import type { Sandbox } from "./sandbox.js";

/** What every sandboxed process of a runtime may see and change, beside its mode and network. */
export interface SandboxScope {
  workspace: string;
  /** Never changed: the config dir, the agents and skills dirs, the tool modules and the MCP server lists it loads. */
  protectedDirs: string[];
  /** Never seen: the data dir, and the secrets troupe.yaml names or keeps beside it (a seed, a key). */
  hiddenDirs: string[];
  /** Mounted read-only besides the system. */
  readPaths: string[];
}

/**
 * A runtime's scope from its config: the config dir, the agents and skills dirs, every tool module an agent names and every
 * file `mcpServersFrom` names (a `.mcp.json` says what commands to start) are protected (troupe
 * runs them when it starts, and they may live in the workspace), the data dir is hidden,
 * `sandbox.readPaths` are resolved against the config dir. The user's own config dir (which config
 * dirs they trust) is protected too, for a workspace that holds it (a home directory).
 */
export function sandboxScope(config: LoadedConfig, workspace: string, env: NodeJS.ProcessEnv): SandboxScope {
  const modules = [...config.agents.values()].flatMap(({ definition }) =>
    definition.toolModules.map((path) => resolve(config.dir, path)),
  );
  return {
    workspace,
    protectedDirs: [
      config.dir,
      // Agents defined outside the config dir (agentsDir: ../agents): an agent's file can say yolo.
      resolve(config.dir, config.troupe.agentsDir),
      // And skills (skillsDir: ../skills): a skill's allowed-tools pre-approves calls.
      resolve(config.dir, config.troupe.skillsDir),
      ...modules,
      ...config.troupe.mcpServersFrom.map((path) => resolve(config.dir, path)),
      userDecisions(workspace, env),
    ],
    hiddenDirs: [dataDir(config.troupe.dataDir, env), ...secretsOfConfig(config)],
    readPaths: config.troupe.sandbox.readPaths.map((path) => resolve(config.dir, path)),
  };
}

/**
 * How a stdio MCP server whose entry says `sandbox:` is started. A server runs for long: nothing is
 * settled after it, and its stdio transport passes no extra file descriptor, so it has no seccomp filter.
 */
export function mcpConfinement(sandbox: Sandbox, scope: SandboxScope, network: boolean) {
  return (mode: HostPlanRequest["mode"], command: readonly string[], env: Record<string, string>) => {
    const { file, args } = sandbox.wrap({ ...scope, mode, network }, command, { filter: false });
    return { file, args, env: sandboxEnv(env, Object.keys(env)) as Record<string, string> };
  };
}

/**
 * The user's config dir (trusted.json): made now when the workspace holds it, since the sandbox
 * covers only what exists, and a command could otherwise make it and write a trust record.
 */
function userDecisions(workspace: string, env: NodeJS.ProcessEnv): string {
  const dir = userConfigDir(env);
  const real = realPathOrUndefined(workspace);
  if (real && isInside(real, resolve(dir))) privateDir(dir);
  return dir;
}

/** Files beside troupe.yaml that hold secrets by their name: a seed, credentials, a key, an env file. */
const SECRET_NAME = /^(?:env|\.env|.*\.(?:env|nk|creds|key|pem))$/;

/**
 * The secrets a runtime's config names (NATS seeds and credentials, the TLS key) and the files of
 * its config dir named as secrets are (a deployment's `/etc/troupe/worker.nk` and `env`, which a
 * systemd unit reads): a sandboxed command sees them empty. The config dir's other files stay
 * readable: an MCP server started there reads its own.
 */
function secretsOfConfig(config: LoadedConfig): string[] {
  const { nats } = config.troupe;
  const named = [nats.nkeySeedFile, nats.credsFile, nats.tls?.keyFile]
    .filter((path): path is string => path !== undefined)
    .map((path) => resolve(config.dir, path));
  const beside = readdirOrEmpty(config.dir)
    .filter((name) => SECRET_NAME.test(name))
    .map((name) => join(config.dir, name));
  return [...named, ...beside];
}

function readdirOrEmpty(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
