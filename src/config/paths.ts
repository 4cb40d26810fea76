import { homedir } from "node:os";
import { join, resolve } from "node:path";

/**
 * Where Troupe keeps its data (the embedded NATS store, local runs): TROUPE_DATA_DIR, else the
 * config's `dataDir`, else the platform's data directory.
 */
export function dataDir(configured: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (env.TROUPE_DATA_DIR) return resolve(env.TROUPE_DATA_DIR);
  if (configured) return resolve(configured);
  if (process.platform === "darwin") return join(homedir(), "Library", "Application Support", "troupe");
  if (process.platform === "win32")
    return join(env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "troupe");
  return join(env.XDG_DATA_HOME ?? join(homedir(), ".local", "share"), "troupe");
}

/**
 * Where Troupe keeps what the user decided for themselves, outside every workspace and apart from the
 * data dir a config may choose: `$XDG_CONFIG_HOME/troupe` (else `~/.config/troupe`; `%APPDATA%\troupe`
 * on Windows). Never taken from a config, since it says which configs to believe.
 */
export function userConfigDir(env: NodeJS.ProcessEnv = process.env): string {
  if (process.platform === "win32")
    return join(env.APPDATA ?? join(homedir(), "AppData", "Roaming"), "troupe");
  return join(env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config"), "troupe");
}
