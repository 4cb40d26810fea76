import { isAbsolute, relative, sep } from "node:path";

/** `path` is `root` itself or somewhere under it (both absolute and already resolved). */
export function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (rel !== ".." && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}
