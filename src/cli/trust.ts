import { existsSync, realpathSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { CONFIG_FILE, isTroupesOwn, type LoadedConfig, loadConfig } from "../config/load.js";
import { envFilePath } from "../config/mcp-env-file.js";
import {
  assertTrusted,
  readTrustStore,
  shellWord,
  stillMatches,
  trustConfigDir,
  trustStorePath,
  UntrustedConfigError,
  writeTrustStore,
} from "../config/trusted-configs.js";
import { UserError } from "../errors.js";
import { isInside, realPathOrUndefined } from "../util/paths.js";
import { visibleLine } from "../util/visible.js";

/**
 * `troupe trust [DIR]`: reads the config dir (default ./config) as troupe would load it, and records
 * its real path and a digest of every file it loads, so that troupe run here uses it until one of
 * them changes. Starts nothing from it.
 */
export function runTrust(given: string | undefined, cwd = process.cwd(), env = process.env): number {
  const dir = configDirOf(given ?? "config", cwd);
  if (isTroupesOwn(dir)) {
    process.stdout.write(
      `${visibleLine(dir)} is the config shipped with troupe: it is trusted as troupe's own\n`,
    );
    return 0;
  }
  const config = loadConfig({ config: dir, cwd, env, untrusted: "read" });
  const real = realpathSync(dir);
  const record = trustConfigDir(trustStorePath(env), real, rootsOf(config, real));
  const files = Object.keys(record.files);
  process.stdout.write(
    `trusted ${visibleLine(real)}: ${files.length} file${files.length === 1 ? "" : "s"}; troupe asks again when any of them changes\n`,
  );
  const workspace = writableWorkspaceHolding(config, real, cwd);
  if (workspace)
    process.stderr.write(
      `troupe: warning: ${visibleLine(real)} is inside the workspace ${visibleLine(workspace)}, which agents write: troupe keeps tools and sandboxed commands from changing it, but trust it only if you wrote what is in it (a cloned repository's config runs its commands as you)\n`,
    );
  return 0;
}

/**
 * What `agents validate` adds for a config it read found here and untrusted: that nothing starts
 * from it yet, and the command to trust it.
 */
export function untrustedNote(dir: string, cwd = process.cwd(), env = process.env): string | undefined {
  if (isTroupesOwn(dir)) return undefined;
  try {
    assertTrusted(dir, cwd, env);
    return undefined;
  } catch (error) {
    if (error instanceof UntrustedConfigError) return error.message;
    throw error;
  }
}

/**
 * A config dir named to be checked (`agents validate DIR --check-servers`) starts its servers only
 * once trusted, as one found here: naming it says which to look at, not that its commands are yours.
 */
export function assertTrustedToStart(given: string, cwd = process.cwd(), env = process.env): void {
  const dir = resolve(cwd, given);
  if (!isTroupesOwn(dir)) assertTrusted(dir, cwd, env);
}

/** `troupe trust --list`: every trusted dir, and whether it still is what was trusted. */
export function runTrustList(env = process.env): number {
  const store = readTrustStore(trustStorePath(env));
  const dirs = Object.keys(store.configs).sort();
  if (dirs.length === 0) process.stdout.write("no config dir is trusted (troupe's own is, always)\n");
  for (const dir of dirs) {
    const record = store.configs[dir];
    if (!record) continue;
    const state = !existsSync(dir)
      ? "gone"
      : stillMatches(dir, record)
        ? "as trusted"
        : "changed since trusted";
    process.stdout.write(`${visibleLine(dir)}  ${state} (${visibleLine(record.trustedAt)})\n`);
  }
  return 0;
}

/** `troupe trust --forget DIR`. */
export function runTrustForget(given: string, cwd = process.cwd(), env = process.env): number {
  const path = resolve(cwd, given);
  const dir = realPathOrUndefined(path) ?? path;
  const file = trustStorePath(env);
  const store = readTrustStore(file);
  if (!store.configs[dir])
    throw new UserError(`${visibleLine(dir)} is not a trusted config dir (see troupe trust --list)`);
  delete store.configs[dir];
  writeTrustStore(file, store);
  process.stdout.write(`forgot ${visibleLine(dir)}: troupe refuses it until it is trusted again\n`);
  return 0;
}

function configDirOf(given: string, cwd: string): string {
  const path = resolve(cwd, given);
  if (!existsSync(path))
    throw new UserError(
      `${visibleLine(given)}: no such directory; name the config dir to trust (troupe trust DIR)`,
    );
  const dir = statSync(path).isDirectory() ? path : dirname(path);
  if (!existsSync(join(dir, CONFIG_FILE)))
    throw new UserError(
      `${visibleLine(given)} holds no ${CONFIG_FILE}: name the config dir to trust (troupe trust DIR)`,
    );
  return dir;
}

/** What the config loads from outside its dir: these are digested with it. */
function rootsOf(config: LoadedConfig, dir: string): string[] {
  const named = [
    config.troupe.agentsDir,
    config.troupe.skillsDir,
    ...config.troupe.mcpServersFrom,
    ...[...config.agents.values()].flatMap(({ definition }) => definition.toolModules),
    // Its variables reach a server's process, as its command does.
    ...Object.values(config.troupe.mcpServers).flatMap((server) => envFilePath(server, config.dir) ?? []),
  ];
  // Resolved as the loader resolves them: against the dir as found.
  const paths = named.map((path) => resolve(config.dir, path));
  const outside = (path: string) =>
    !isInside(config.dir, path) && !isInside(dir, realPathOrUndefined(path) ?? path);
  return [...new Set(paths.filter(outside))].sort();
}

/** The workspace (troupe.yaml's, or one the daemon serves) that holds `dir`, as the user would name it. */
function writableWorkspaceHolding(config: LoadedConfig, dir: string, cwd: string): string | undefined {
  // The directory troupe runs in too: the config's own `workspace` is the config's to say.
  const workspaces = [
    cwd,
    resolve(cwd, config.troupe.workspace),
    ...config.troupe.daemon.workspaces.map((path) => resolve(config.dir, path)),
  ];
  for (const workspace of workspaces) {
    const real = realPathOrUndefined(workspace);
    if (real && isInside(real, dir)) return shellWord(relative(cwd, workspace) || ".");
  }
  return undefined;
}
