import { lstatSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/**
 * The first symbolic link on the way from `dir` to `path`, below the directory the two share, as
 * that shared directory sees it (`.cursor/mcp.json`); undefined when there is none. A file troupe
 * loads and runs at its next start (a tool module, an MCP server list) is protected by its real
 * path; a link on the way to it lies in a directory a command may write (the workspace), where the
 * link can be swapped for one to another file. Links above the shared directory (a system's /var)
 * are no one's to swap.
 */
export function linkOnTheWay(dir: string, path: string): string | undefined {
  const target = resolve(dir, path);
  let shared = resolve(dir);
  while (shared !== dirname(shared) && !`${target}${sep}`.startsWith(`${shared}${sep}`))
    shared = dirname(shared);
  let at = shared;
  for (const part of relative(shared, target).split(sep).filter(Boolean)) {
    at = join(at, part);
    try {
      if (lstatSync(at).isSymbolicLink()) return relative(shared, at);
    } catch {
      return undefined; // not there (yet): the loader says so
    }
  }
  return undefined;
}
