import { createHash } from "node:crypto";
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  realpathSync,
  type Stats,
  statSync,
} from "node:fs";
import { join, relative, resolve } from "node:path";
import { UserError } from "../errors.js";
import { isInside } from "../util/paths.js";

/**
 * What a config dir loads, file by file: each file's key (its path relative to the dir when inside
 * it, else its absolute path) and what it held (`sha256:HEX`; a link adds where it leads; a FIFO or
 * device is named by its kind and never opened). Two digests differ exactly where a file was
 * changed, added or removed.
 */
export type ConfigDigest = Record<string, string>;

export class ConfigDigestError extends UserError {
  override name = "ConfigDigestError";
}

/** More than a config dir holds: a dir this big is not one, and reading it all would be slow. */
const MAX_FILES = 5000;
const MAX_BYTES = 64 * 1024 * 1024;

/**
 * The digest of everything under `dir` (its real path) and under each of `roots` that lies outside
 * it (an agents dir, skills dir, tool module or MCP server list the config names elsewhere). Every
 * file counts, not only the ones this version's loader reads: a hook's script or a tool module's
 * import lives beside them. `.git` directories are left out: the loader never reads them and git
 * changes them on its own.
 */
export function digestConfig(dir: string, roots: readonly string[] = []): ConfigDigest {
  const walk = new Walk();
  walk.entry(dir, dir);
  for (const root of roots) {
    const path = resolve(dir, root);
    if (isInside(dir, path) || isInside(dir, realOrUndefined(path) ?? path)) continue;
    walk.entry(path, dir);
  }
  return walk.digest;
}

/** The keys of `before` and `after` that differ, each with why: `FILE`, `FILE (new)`, `FILE (removed)`. */
export function changedFiles(before: ConfigDigest, after: ConfigDigest): string[] {
  const changed: string[] = [];
  for (const [key, value] of Object.entries(after)) {
    const was = before[key];
    if (was === undefined) changed.push(`${key} (new)`);
    else if (was !== value) changed.push(key);
  }
  for (const key of Object.keys(before)) if (!(key in after)) changed.push(`${key} (removed)`);
  return changed.sort();
}

class Walk {
  readonly digest: ConfigDigest = {};
  #bytes = 0;
  #count = 0;
  /** Real paths of the directories on the way down: a link back up is not followed round. */
  readonly #above = new Set<string>();

  entry(path: string, base: string): void {
    const key = isInside(base, path) ? relative(base, path) || "." : path;
    let info: Stats;
    try {
      info = lstatSync(path);
    } catch {
      this.#put(key, "missing");
      return;
    }
    let link = "";
    if (info.isSymbolicLink()) {
      link = `link:${readlinkSync(path)} `;
      try {
        info = statSync(path);
      } catch {
        this.#put(key, `${link}dangling`);
        return;
      }
    }
    if (info.isDirectory()) {
      const real = realpathSync(path);
      if (this.#above.has(real)) {
        this.#put(key, `${link}loop`);
        return;
      }
      if (link) this.#put(key, link.trim());
      this.#above.add(real);
      for (const name of readdirSync(path).sort())
        if (name.toLowerCase() !== ".git") this.entry(join(path, name), base);
      this.#above.delete(real);
      return;
    }
    this.#put(key, `${link}${info.isFile() ? this.#hash(path) : `special:${kindOf(info)}`}`);
  }

  #put(key: string, value: string): void {
    if (++this.#count > MAX_FILES)
      throw new ConfigDigestError(
        `the config holds more than ${MAX_FILES} files: keep only its own files in it`,
      );
    this.digest[key] = value;
  }

  /** Opened without blocking and read only when it is still a regular file once open. */
  #hash(path: string): string {
    const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      if (!fstatSync(fd).isFile()) return "special:swapped";
      const hash = createHash("sha256");
      const buffer = Buffer.alloc(64 * 1024);
      for (let read = readSync(fd, buffer); read > 0; read = readSync(fd, buffer)) {
        this.#bytes += read;
        if (this.#bytes > MAX_BYTES)
          throw new ConfigDigestError(
            `the config holds more than ${MAX_BYTES / 1024 / 1024} MB: keep only its own files in it`,
          );
        hash.update(buffer.subarray(0, read));
      }
      return `sha256:${hash.digest("hex")}`;
    } finally {
      closeSync(fd);
    }
  }
}

function kindOf(info: Stats): string {
  if (info.isFIFO()) return "fifo";
  if (info.isSocket()) return "socket";
  if (info.isCharacterDevice() || info.isBlockDevice()) return "device";
  return "other";
}

function realOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}
