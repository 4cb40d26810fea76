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
