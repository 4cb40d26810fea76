import { existsSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";

export class PathOutsideWorkspaceError extends Error {
  override name = "PathOutsideWorkspaceError";
}

/**
 * Resolves `path` (relative to the workspace, or absolute) to a real path inside the workspace,
 * following symlinks of the file and of every parent; throws when it leads outside. A path that does
 * not exist yet is judged by its nearest existing parent.
 */
export function resolveInWorkspace(workspace: string, path: string): string {
  const root = realpathSync(workspace);
  const wanted = resolve(root, path);
  let existing = wanted;
  const missing: string[] = [];
  while (!existsSync(existing)) {
    const parent = dirname(existing);
    if (parent === existing) break;
    missing.unshift(existing.slice(parent.length + (parent.endsWith(sep) ? 0 : 1)));
    existing = parent;
  }
  const real = resolve(realpathSync(existing), ...missing);
  const rel = relative(root, real);
  if (rel === "" || (!rel.startsWith("..") && !isAbsolute(rel))) return real;
  throw new PathOutsideWorkspaceError(`"${path}" is outside the workspace`);
}

/** A path as the model should see it: relative to the workspace. */
export function workspaceRelative(workspace: string, real: string): string {
  return relative(realpathSync(workspace), real) || ".";
}
