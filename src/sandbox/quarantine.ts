import { randomBytes } from "node:crypto";
import { chmodSync, lstatSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { TroupeError } from "../errors.js";
import { lstatOrUndefined, realPathOrUndefined } from "../util/paths.js";
import { visibleBytes } from "../util/visible.js";
import type { ProtectedEntry } from "./protected-entries.js";

export class QuarantineError extends TroupeError {
  override name = "QuarantineError";
}

/**
 * Moves out of git's way a protected entry a sandboxed command made or changed: a `.git` or
 * `.troupe` is renamed `NAME.quarantined-RANDOM`; a directory shaped like a repository loses its HEAD
 * the same way (the rest of it is the command's ordinary work). A name the command took already is
 * tried again under another; a parent it made unwritable is opened for this process's user; what
 * cannot be renamed is removed, since the command made it. Throws `QuarantineError` when none of
 * that works, or when the directory it is in is no longer itself (a parent swapped for a symlink
 * would have a rename act elsewhere).
 */
export function quarantine(entry: ProtectedEntry): { from: string; to: string } {
  const from = entry.kind === "repository" ? join(entry.path, "HEAD") : entry.path;
  const parent = dirname(from);
  if (realPathOrUndefined(parent) !== parent)
    throw new QuarantineError(`${parent} is no longer a directory of the workspace`);
  for (let attempt = 0; attempt < 3; attempt++) {
    const to = `${from}.quarantined-${randomBytes(6).toString("hex")}`;
    try {
      renameSync(from, to);
      return { from, to };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EACCES" || code === "EPERM") openUp(parent);
      else if (!["EEXIST", "ENOTEMPTY", "ENOTDIR", "EISDIR"].includes(code ?? "")) break;
    }
  }
  try {
    rmSync(from, { recursive: true, force: true });
    if (!lstatOrUndefined(from)) return { from, to: "(removed)" };
  } catch {}
  throw new QuarantineError(`${from} could not be moved aside or removed`);
}

/**
 * Renames a directory or socket whose name is not UTF-8 (so no mount can name it) to one that is:
 * `unnamed-HEX.quarantined-RANDOM`, its name's bytes in hex, beside it. What it holds can then be
 * looked at, and moved aside, by name.
 */
export function renameUnnamed(path: Buffer): { from: string; to: string } {
  const slash = path.lastIndexOf("/");
  const parent = path.subarray(0, slash).toString();
  const name = path.subarray(slash + 1);
  const to = join(parent, `unnamed-${name.toString("hex")}.quarantined-${randomBytes(6).toString("hex")}`);
  try {
    renameSync(path, to);
  } catch (error) {
    throw new QuarantineError(`${visibleBytes(path)} could not be renamed (${(error as Error).message})`);
  }
  return { from: visibleBytes(path), to };
}

/** Gives this process's user full access to a directory a command closed (chmod u+rwx). */
export function openUp(dir: string): void {
  try {
    chmodSync(dir, (lstatSync(dir).mode & 0o7777) | 0o700);
  } catch {}
}
