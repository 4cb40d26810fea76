import { existsSync, realpathSync } from "node:fs";
import { join, relative } from "node:path";
import { z } from "zod";
import { UserError } from "../errors.js";
import { isInside } from "../util/paths.js";
import { readSecretFile, writePrivateFile } from "../util/secret-files.js";
import { type ConfigDigest, changedFiles, digestConfig } from "./config-digest.js";
import { userConfigDir } from "./paths.js";

/**
 * A config dir found from the working directory that the user has not trusted, or that changed
 * since: nothing of it is loaded. The message names the dir and the command that trusts it.
 */
export class UntrustedConfigError extends UserError {
  override name = "UntrustedConfigError";
}

const recordSchema = z.strictObject({
  trustedAt: z.string(),
  /** What the config names outside its dir (agents, skills, tool modules, MCP server lists), as real paths. */
  roots: z.array(z.string()),
  files: z.record(z.string(), z.string()),
});
export type TrustRecord = z.infer<typeof recordSchema>;

const storeSchema = z.strictObject({
  version: z.literal(1),
  /** By the config dir's real path. */
  configs: z.record(z.string(), recordSchema),
});
export type TrustStore = z.infer<typeof storeSchema>;

/** The file of the user's trusted config dirs (0600, in a 0700 dir outside every workspace). */
export function trustStorePath(env: NodeJS.ProcessEnv = process.env): string {
  return join(userConfigDir(env), "trusted.json");
}

export function readTrustStore(path: string): TrustStore {
  if (!existsSync(path)) return { version: 1, configs: {} };
  let data: unknown;
  try {
    data = JSON.parse(readSecretFile(path));
  } catch (error) {
    if (error instanceof UserError) throw error;
    throw new UserError(
      `${path} is not JSON (${(error as Error).message}): remove it and trust your config dirs again`,
    );
  }
  const parsed = storeSchema.safeParse(data);
  if (!parsed.success)
    throw new UserError(
      `${path} is not a list of trusted config dirs: remove it and trust your config dirs again`,
    );
  return parsed.data;
}

export function writeTrustStore(path: string, store: TrustStore): void {
  writePrivateFile(path, `${JSON.stringify(store, null, 2)}\n`);
}

/** Records `dir` (a real path) as trusted with what it loads now; returns the record. */
export function trustConfigDir(path: string, dir: string, roots: readonly string[]): TrustRecord {
  const store = readTrustStore(path);
  const record = { trustedAt: new Date().toISOString(), roots: [...roots], files: digestConfig(dir, roots) };
  store.configs[dir] = record;
  writeTrustStore(path, store);
  return record;
}

/**
 * Throws `UntrustedConfigError` unless the user trusted `dir` (found from `cwd`) and nothing it
 * loads changed since: the one check between a config an agent may have written and anything
 * started from it.
 */
export function assertTrusted(dir: string, cwd: string, env: NodeJS.ProcessEnv): void {
  const real = realpathSync(dir);
  // A ./config that leads out of the directory it was found in (`config -> ../other/config`, as a
  // cloned repository may ship) would lend that dir's trust, and its policy, to this one.
  if (!isInside(realpathSync(cwd), real))
    throw new UntrustedConfigError(
      `${shownDir(dir, real, cwd)} leads out of this directory (a link): a config found here is used only when it is here; name it with --config if you mean it`,
    );
  const record = readTrustStore(trustStorePath(env)).configs[real];
  const shown = shownDir(dir, real, cwd);
  const command = `troupe trust ${shellWord(relativeIfInside(cwd, dir))}`;
  if (!record)
    throw new UntrustedConfigError(
      `${shown} is a config dir you have not trusted (its MCP servers, hooks and tool modules would run as you): look at it, then run ${command}`,
    );
  const changed = changedFiles(record.files, digestConfig(real, record.roots));
  if (changed.length > 0)
    throw new UntrustedConfigError(
      `${shown} changed since you trusted it: ${listed(changed)}; look at what changed, then run ${command}`,
    );
}

/** Whether the record still matches the dir: for `troupe trust --list`. */
export function stillMatches(dir: string, record: TrustRecord): ConfigDigest | undefined {
  const now = digestConfig(dir, record.roots);
  return changedFiles(record.files, now).length === 0 ? now : undefined;
}

function listed(changed: string[]): string {
  const shown = changed.slice(0, 6).map(visible).join(", ");
  return changed.length > 6 ? `${shown} and ${changed.length - 6} more` : shown;
}

function shownDir(dir: string, real: string, cwd: string): string {
  const given = relativeIfInside(cwd, dir);
  const name = given.startsWith("/") ? given : `./${given}`;
  return visible(real === dir ? name : `${name} (${real})`);
}

function relativeIfInside(cwd: string, dir: string): string {
  return isInside(cwd, dir) ? relative(cwd, dir) || "." : dir;
}

/** A path as one shell word a user can paste (quoted, with controls shown escaped, when it needs it). */
export function shellWord(path: string): string {
  if (/^[\w./@%+=:,-]+$/.test(path)) return path;
  return `'${visible(path).replaceAll("'", "'\\''")}'`;
}

/** A name from the filesystem, with control and bidi characters shown, never sent to the terminal as they are. */
function visible(text: string): string {
  return text.replace(
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point here
    /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
