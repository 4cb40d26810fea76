import { statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { RequestRefusedError } from "../bus/bus.js";
import { isInside, realPathOrUndefined } from "../util/paths.js";

/**
 * A workspace a client asked for, as its real path, when it lies in one of the daemon's workspaces
 * (`configured`); refused otherwise, never swapped for another. A path outside them is refused on
 * the path as given, before anything is looked up on the disk, and with one answer whatever lies
 * there (a link in a workspace that leads out too): what exists on the daemon's host outside its
 * workspaces is no client's to learn. Inside, it must be a directory that may be a workspace at all
 * (`refusal`: not in a .git, not the data dir…).
 */
export function allowedWorkspace(
  asked: string,
  configured: readonly string[],
  refusal: (real: string) => string | undefined,
): string {
  const given = configured.map((root) => resolve(root));
  const roots = given.map((root) => realPathOrUndefined(root) ?? root);
  const within = (path: string, among: string[]) => among.some((root) => isInside(root, path));
  const outside = new RequestRefusedError(
    `workspace ${asked} is outside the daemon's workspaces (${roots.join(", ")}): add it to daemon.workspaces in its troupe.yaml`,
  );
  const path = resolve(asked);
  if (!within(path, [...given, ...roots])) throw outside;
  const real = realPathOrUndefined(path);
  if (!within(real ?? nearestReal(path), roots)) throw outside;
  if (!real || !statSync(real).isDirectory())
    throw new RequestRefusedError(`workspace ${asked} is not a directory on the daemon's host`);
  const why = refusal(real);
  if (why) throw new RequestRefusedError(`workspace ${asked} ${why}`);
  return real;
}

/**
 * Where the nearest part of `path` that exists really is: for a path that does not resolve, the
 * real path of the deepest directory above it that does (through a link, where that link leads).
 */
function nearestReal(path: string): string {
  for (let at = dirname(path); ; at = dirname(at)) {
    const real = realPathOrUndefined(at);
    if (real || at === dirname(at)) return real ?? at;
  }
}
