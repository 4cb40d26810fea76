import { accessSync, constants, readlinkSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { lstatOrUndefined, realPathOrUndefined } from "../util/paths.js";

/*
 * Where a program started outside the sandbox comes from, judged by real path: what MCP server
 * launches and hooks run as the user may come from nowhere an agent can write.
 */

/** A command as spawn would find it: a path relative to `cwd`, or the first executable of that name on PATH. */
export function findProgram(command: string, cwd: string, path: readonly string[]): string | undefined {
  if (command.includes("/")) return resolve(cwd, command);
  for (const dir of path) {
    const candidate = join(dir, command);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {}
  }
  return undefined;
}

/**
 * The real path of `path`, which may not exist yet: a dangling link by where it leads, a missing
 * name by its nearest existing parent (what it will be once made).
 */
export function realPathSoFar(path: string, depth = 0): string {
  const absolute = resolve(path);
  const real = realPathOrUndefined(absolute);
  if (real !== undefined || depth > 40) return real ?? absolute;
  if (lstatOrUndefined(absolute)?.isSymbolicLink())
    return realPathSoFar(resolve(dirname(absolute), readlinkSync(absolute)), depth + 1);
  const parent = dirname(absolute);
  return parent === absolute ? absolute : join(realPathSoFar(parent, depth), basename(absolute));
}
