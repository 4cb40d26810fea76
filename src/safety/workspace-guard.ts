import { existsSync, readdirSync, readlinkSync, realpathSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { TroupeError } from "../errors.js";

export class PathOutsideWorkspaceError extends TroupeError {
  override name = "PathOutsideWorkspaceError";
}

import { isInside, lstatOrUndefined } from "../util/paths.js";
import { isProtectedName, isRepositoryShape, LOADED_AT_ROOT } from "./protected-paths.js";

export interface GuardOptions {
  /** Directories no tool may write to even when inside the workspace (the config dir). */
  protectedDirs?: string[];
  /** Directories no tool may read, list or change, even inside the workspace (troupe's data dir). */
  hiddenDirs?: readonly string[] | undefined;
}

/**
 * Resolves `path` (relative to the workspace, or absolute) to a real path inside the workspace,
 * following every symlink of the file and its parents (a dangling one by its target); throws
 * `PathOutsideWorkspaceError` when it leads outside. A path that does not exist yet is judged by its
 * nearest existing parent.
 */
export function resolveInWorkspace(
  workspace: string,
  path: string,
  options: Pick<GuardOptions, "hiddenDirs"> = {},
): string {
  const root = realpathSync(workspace);
  const real = realPathOf(resolve(root, path));
  if (!isInside(root, real)) throw new PathOutsideWorkspaceError(`"${path}" is outside the workspace`);
  if (isHidden(real, options.hiddenDirs))
    throw new PathOutsideWorkspaceError(
      `"${path}" is in troupe's data directory (credentials, keys, runs), which tools may not read or change`,
    );
  return real;
}

/** Whether a real path is in one of the hidden dirs (which may not exist yet). */
export function isHidden(real: string, hiddenDirs: readonly string[] = []): boolean {
  return hiddenDirs.some((dir) => isInside(existsSync(dir) ? realpathSync(dir) : resolve(dir), real));
}

/**
 * As `resolveInWorkspace`, and refuses anything in a `.git` or `.troupe` directory and the protected
 * dirs: judged on the path as written and on where it leads, step by step, so a symlink named
 * `config` (to anywhere) or a symlink into `.git` is no way round.
 */
export function resolveForWrite(workspace: string, path: string, options: GuardOptions = {}): string {
  const root = realpathSync(workspace);
  const real = resolveInWorkspace(root, path, options);
  const protectedDirs = (options.protectedDirs ?? []).flatMap((dir) => [
    resolve(dir),
    ...(existsSync(dir) ? [realpathSync(dir)] : []),
  ]);
  for (const step of [real, ...stepsOf(workspace, root, path)]) {
    const why = refusal(root, step, protectedDirs) ?? repositoryRefusal(root, step);
    if (why) throw new PathOutsideWorkspaceError(`"${path}" ${why}`);
  }
  for (const dir of protectedDirs) {
    // A tool that may change a directory may move it or remove it, and put another in its place.
    if (real !== root && isInside(real, dir))
      throw new PathOutsideWorkspaceError(
        `"${path}" holds the config directory or a file troupe loads (a tool module, an MCP server list), which tools may not move or replace`,
      );
  }
  return real;
}

/** Why a write that goes through `step` (a path as written, or where it leads) is refused, if it is. */
function refusal(root: string, step: string, protectedDirs: readonly string[]): string | undefined {
  if (isInside(root, step)) {
    // At any depth and in any case (a vendored repository's `.git` too).
    const named = relative(root, step).split(sep).find(isProtectedName);
    if (named !== undefined) return `is inside ${named}/, which tools may not change`;
  }
  if (protectedDirs.some((dir) => isInside(dir, step)))
    return "is in the config directory or a file troupe loads (a tool module, an MCP server list), which tools may not change";
  if (LOADED_AT_ROOT.some((loaded) => step === resolve(root, loaded)))
    return "is what troupe loads as its config when run here, which tools may not change";
  return undefined;
}

/**
 * Why a write to `target` touches a repository git would run code from: it is inside a directory
 * git takes for a repository (a HEAD with objects and refs, or with a commondir: its config and hooks
 * run at the next git command there), or it would complete that shape, itself or by a directory it makes.
 */
function repositoryRefusal(root: string, target: string): string | undefined {
  if (!isInside(root, target)) return undefined;
  let dir = root;
  for (const part of relative(root, target).split(sep).filter(Boolean)) {
    const names = namesIn(dir);
    const shown = relative(root, dir) || ".";
    if (isRepositoryShape(names))
      return `is inside ${shown}/, which git takes for a repository (it holds HEAD with objects and refs, or with commondir) and runs code from; tools may not change it`;
    if (isRepositoryShape([...names, part]))
      return `would make ${shown}/ a directory git takes for a repository (HEAD with objects and refs, or with commondir), which runs code at the next git command there; tools may not`;
    dir = join(dir, part);
  }
  return undefined;
}

/** The names in a directory, none when it is not one (yet). */
function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/**
 * Each step of `path` below the workspace as written (`config`, then `config/troupe.yaml`), placed
 * on the real root, and where each step leads: the name a later lookup uses is as much the path
 * as its target.
 */
function stepsOf(workspace: string, root: string, path: string): string[] {
  const base = [resolve(workspace), root].find((dir) => isInside(dir, resolve(dir, path)));
  if (base === undefined) return [];
  const rel = relative(base, resolve(base, path));
  const steps: string[] = [];
  let at = root;
  for (const part of rel.split(sep).filter(Boolean)) {
    at = join(at, part);
    steps.push(at, realPathOf(at));
  }
  return steps;
}

/** A path as the model should see it: relative to the workspace. */
export function workspaceRelative(workspace: string, real: string): string {
  return relative(realpathSync(workspace), real) || ".";
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
