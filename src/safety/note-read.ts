import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readSync,
  realpathSync,
  type Stats,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { isInside } from "../util/paths.js";
import { heldPathSync, READ_FLAGS, type ReadRefusal, verdict } from "./confined-read.js";

/** Why a project note was skipped: a read refusal, or a name that is a link, or a file that failed to open. */
export type NoteRefusal = ReadRefusal | { refused: "link" } | { refused: "unreadable"; code: string };

export interface NoteOptions {
  /** The real path the note's directory must be inside (the workspace); none: wherever it is. */
  within?: string | undefined;
  /** Bytes read at most: the rest of a longer file is never read. */
  cap: number;
  /** Read a regular file that has other hard links too (troupe.yaml `sandbox.readHardLinks`). */
  readHardLinks?: boolean | undefined;
  hiddenDirs?: readonly string[] | undefined;
}

export interface Note {
  bytes: Buffer;
  /** The file goes on past `cap`. */
  cut: boolean;
  /** The file's size, times and inode as opened: equal stamps mean the same text. */
  stamp: string;
}

// O_NOCTTY: a terminal device swapped in after the lstat must not become Troupe's controlling tty.
const NOTE_FLAGS = READ_FLAGS | constants.O_NOCTTY;

/**
 * Reads a project note (AGENTS.md, a skill's SKILL.md) that an agent, or a repository, may have
 * made: the file's own name is never followed (a symbolic link is skipped, wherever it leads), its
 * directory must be inside `within` by real path, it is opened without blocking (a FIFO or device
 * is refused before anything is read from it), it must be a regular file with no other hard link
 * (those names may be outside, and nothing says where), and at most `cap` bytes are read from the
 * descriptor. Synchronous: nothing here can wait on another process.
 */
export function readNoteSync(path: string, options: NoteOptions): Note | NoteRefusal {
  let dir: string;
  try {
    dir = realpathSync(dirname(path));
  } catch {
    return { refused: "missing" };
  }
  const root = options.within ?? dir;
  if (!isInside(root, dir)) return { refused: "outside" };
  const file = join(dir, basename(path));
  // Looked at first, so a FIFO or device is never opened at all (opening some devices acts).
  const first = lstatOrMissing(file);
  if (first === undefined) return { refused: "missing" };
  if (first.isSymbolicLink()) return { refused: "link" };
  if (first.isDirectory()) return { refused: "directory" };
  if (!first.isFile()) return { refused: "not-a-file" };
  let fd: number;
  try {
    fd = openSync(file, NOTE_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    if (code === "ELOOP") return { refused: "link" };
    if (code === "ENOENT") return { refused: "missing" };
    return { refused: "unreadable", code };
  }
  try {
    const info = fstatSync(fd);
    const refusal = verdict(root, info, info.isFile() ? heldPathSync(file, fd, info) : undefined, options);
    if (refusal) return refusal;
    const { bytes, cut } = readAtMost(fd, options.cap);
    return { bytes, cut, stamp: stampOf(info) };
  } finally {
    closeSync(fd);
  }
}

/** What a note's name holds now, without opening it: equal to a `Note`'s stamp when unchanged. */
export function noteStamp(path: string): string | undefined {
  const info = lstatOrMissing(path);
  return info?.isFile() ? stampOf(info) : undefined;
}

/** One line for the prompt: why a note was left out (the model is told it exists and was skipped). */
export function skippedNote(name: string, refusal: NoteRefusal): string {
  return `${name} skipped: ${why(refusal)} (project notes are read only from a regular file inside the workspace)`;
}

function why(refusal: NoteRefusal): string {
  switch (refusal.refused) {
    case "link":
      return "a symbolic link";
    case "directory":
      return "a directory";
    case "not-a-file":
      return "not a regular file";
    case "hard-linked":
      return `a file with ${refusal.links} hard links, whose other names may be outside the workspace`;
    case "outside":
      return "outside the workspace";
    case "hidden":
      return "in troupe's data directory";
    case "unreadable":
      return `it cannot be opened (${refusal.code})`;
    case "missing":
      return "gone";
  }
}

function readAtMost(fd: number, cap: number): { bytes: Buffer; cut: boolean } {
  const buffer = Buffer.alloc(cap + 1);
  let filled = 0;
  while (filled < buffer.length) {
    const got = readSync(fd, buffer, filled, buffer.length - filled, null);
    if (got === 0) break;
    filled += got;
  }
  return { bytes: buffer.subarray(0, Math.min(filled, cap)), cut: filled > cap };
}

function lstatOrMissing(path: string): Stats | undefined {
  try {
    return lstatSync(path, { throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function stampOf(info: Stats): string {
  return `${info.size}:${info.mtimeMs}:${info.ctimeMs}:${info.ino}:${info.nlink}`;
}
