import { constants, readlinkSync, realpathSync, type Stats, statSync } from "node:fs";
import { type FileHandle, open, readlink, realpath, stat } from "node:fs/promises";
import { isInside } from "../util/paths.js";
import { isHidden } from "./workspace-guard.js";

/** Why a file was not opened: the caller turns it into a tool error, or skips the file. */
export type ReadRefusal =
  | { refused: "missing" }
  | { refused: "outside" }
  | { refused: "hidden" }
  | { refused: "directory" }
  | { refused: "not-a-file" }
  | { refused: "hard-linked"; links: number };

export interface ReadOptions {
  /** Open regular files that have other hard links too (troupe.yaml `sandbox.readHardLinks`). */
  readHardLinks?: boolean | undefined;
  /** Directories inside the root that are never opened (troupe's data dir). */
  hiddenDirs?: readonly string[] | undefined;
}

// O_NONBLOCK: a FIFO in the workspace must not hang the read. O_NOFOLLOW: a symlink swapped in for
// the file after it was resolved is refused, not followed.
export const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * Opens `path` for reading only when the file opened is inside `root` (a real path). Judged at the
 * point of use: the path is resolved, opened without following a final symlink, and the file the
 * descriptor holds is checked again, so a symlink swapped into a parent meanwhile is caught.
 *
 * A regular file with more than one hard link is refused unless allowed: its other names may be
 * outside the workspace, and a hard link, unlike a symlink, does not say where they are.
 */
export async function openConfined(
  root: string,
  path: string,
  options: ReadOptions = {},
): Promise<FileHandle | ReadRefusal> {
  const real = await realpath(path).catch(() => undefined);
  if (real === undefined) return { refused: "missing" };
  if (!isInside(root, real)) return { refused: "outside" };
  let handle: FileHandle;
  try {
    handle = await open(real, READ_FLAGS);
  } catch (error) {
    return openRefusal(error);
  }
  try {
    const refusal = await judge(root, real, handle, options);
    if (!refusal) return handle;
    await handle.close();
    return refusal;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

export function isRefusal(value: FileHandle | Buffer | ReadRefusal): value is ReadRefusal {
  return "refused" in value;
}

/** Reads a whole file opened by `openConfined`, or says why not. */
export async function readConfined(
  root: string,
  path: string,
  options: ReadOptions = {},
): Promise<Buffer | ReadRefusal> {
  const handle = await openConfined(root, path, options);
  if (isRefusal(handle)) return handle;
  try {
    return await handle.readFile();
  } finally {
    await handle.close();
  }
}

async function judge(
  root: string,
  real: string,
  handle: FileHandle,
  options: ReadOptions,
): Promise<ReadRefusal | undefined> {
  const info = await handle.stat();
  return verdict(root, info, info.isFile() ? await heldPath(real, handle, info) : undefined, options);
}

/** Why the opened file may not be read, or undefined when it may; `held`: the path of the file it is. */
export function verdict(
  root: string,
  info: Stats,
  held: string | undefined,
  options: ReadOptions,
): ReadRefusal | undefined {
  if (info.isDirectory()) return { refused: "directory" };
  if (!info.isFile()) return { refused: "not-a-file" };
  if (info.nlink > 1 && !options.readHardLinks) return { refused: "hard-linked", links: info.nlink };
  if (held === undefined || !isInside(root, held)) return { refused: "outside" };
  if (isHidden(held, options.hiddenDirs)) return { refused: "hidden" };
  return undefined;
}

/**
 * The path of the file the open descriptor holds, or undefined when it cannot be told. Linux names
 * it in /proc; elsewhere, the path must still resolve to itself and to the same file.
 */
async function heldPath(
  real: string,
  handle: FileHandle,
  info: { dev: number; ino: number },
): Promise<string | undefined> {
  const held = await readlink(`/proc/self/fd/${handle.fd}`).catch(() => undefined);
  if (held !== undefined) return held;
  const again = await realpath(real).catch(() => undefined);
  if (again !== real) return undefined;
  const now = await stat(again).catch(() => undefined);
  return now !== undefined && now.dev === info.dev && now.ino === info.ino ? real : undefined;
}

export function heldPathSync(
  real: string,
  fd: number,
  info: { dev: number; ino: number },
): string | undefined {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    try {
      const now = statSync(realpathSync(real));
      return realpathSync(real) === real && now.dev === info.dev && now.ino === info.ino ? real : undefined;
    } catch {
      return undefined;
    }
  }
}

/** A failed open of a checked path: a link met on the way leads outside, a file gone is missing; else thrown. */
function openRefusal(error: unknown): ReadRefusal {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ELOOP") return { refused: "outside" };
  if (code === "ENOENT") return { refused: "missing" };
  throw error;
}
