import { existsSync, lstatSync, readlinkSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";

export class PathOutsideWorkspaceError extends Error {
  override name = "PathOutsideWorkspaceError";
}

/** Places in the workspace no tool may write: the repository's internals and Troupe's own. */
const PROTECTED_DIRS = [".git", ".troupe"];

export interface GuardOptions {
  /** Directories no tool may write to even when inside the workspace (the config dir). */
  protectedDirs?: string[];
}

/**
 * Resolves `path` (relative to the workspace, or absolute) to a real path inside the workspace,
 * following every symlink of the file and its parents (a dangling one by its target); throws
 * `PathOutsideWorkspaceError` when it leads outside. A path that does not exist yet is judged by its
 * nearest existing parent.
 */
export function resolveInWorkspace(workspace: string, path: string): string {
  const root = realpathSync(workspace);
  const real = realPathOf(resolve(root, path));
  if (!inside(root, real)) throw new PathOutsideWorkspaceError(`"${path}" is outside the workspace`);
  return real;
}

/** As `resolveInWorkspace`, and refuses `.git/`, `.troupe/` and the protected dirs. */
export function resolveForWrite(workspace: string, path: string, options: GuardOptions = {}): string {
  const root = realpathSync(workspace);
  const real = resolveInWorkspace(root, path);
  const first = relative(root, real).split(sep)[0];
  if (first !== undefined && PROTECTED_DIRS.includes(first)) {
    throw new PathOutsideWorkspaceError(`"${path}" is inside ${first}/, which tools may not change`);
  }
  for (const dir of options.protectedDirs ?? []) {
    const protectedReal = existsSync(dir) ? realpathSync(dir) : resolve(dir);
    if (inside(protectedReal, real))
      throw new PathOutsideWorkspaceError(`"${path}" is in the config directory, which tools may not change`);
  }
  return real;
}

/** A path as the model should see it: relative to the workspace. */
export function workspaceRelative(workspace: string, real: string): string {
  return relative(realpathSync(workspace), real) || ".";
}

function inside(root: string, real: string): boolean {
  const rel = relative(root, real);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

/** The real path of `wanted`, which may not exist; dangling symlinks are followed to their targets. */
function realPathOf(wanted: string, depth = 0): string {
  if (depth > 40) throw new PathOutsideWorkspaceError("too many levels of symbolic links");
  if (existsSync(wanted)) return realpathSync(wanted);
  const link = lstatOrUndefined(wanted);
  if (link?.isSymbolicLink()) return realPathOf(resolve(dirname(wanted), readlinkSync(wanted)), depth + 1);
  const parent = dirname(wanted);
  if (parent === wanted) return wanted;
  return resolve(realPathOf(parent, depth), wanted.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
}

function lstatOrUndefined(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}
