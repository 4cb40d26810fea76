import {
  chmodSync,
  closeSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";
import { UserError } from "../errors.js";

/** A secret file that is missing its guard, or cannot be written: one line saying how to mend it. */
export class SecretFileError extends UserError {
  override name = "SecretFileError";
}

/** Makes `dir` (and its parents) and keeps it to its owner: mode 0700. */
export function privateDir(dir: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory()) throw new SecretFileError(`${dir} should be a directory: move it away`);
  if (ownedByOther(stat.uid))
    throw new SecretFileError(`${dir} belongs to another user: use your own data dir`);
  if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
  return dir;
}

/**
 * Writes a new secret (mode 0600, in a 0700 directory). Never overwrites: when the file exists,
 * returns false and leaves it as it is, so two processes that race to make it agree on the first.
 */
export function createSecretFile(path: string, content: string): boolean {
  privateDir(dirname(path));
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** Reads a secret, refusing one that others could read or that is not a plain file of this user's. */
export function readSecretFile(path: string): string {
  const stat = lstatSync(path);
  if (!stat.isFile()) throw new SecretFileError(`${path} should be a plain file, not a link or a directory`);
  if (ownedByOther(stat.uid)) throw new SecretFileError(`${path} belongs to another user: use your own`);
  if ((stat.mode & 0o077) !== 0)
    throw new SecretFileError(`${path} can be read by others: chmod 600 ${path}`);
  return readFileSync(path, "utf8");
}

/** Whether a secret exists at `path` (a dangling link or a directory counts as not). */
export function secretExists(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch {
    return false;
  }
}

function ownedByOther(uid: number): boolean {
  return typeof process.getuid === "function" && uid !== process.getuid();
}

/** Writes (or replaces) a file only its owner may read, through a temporary file and a rename. */
export function writePrivateFile(path: string, content: string): void {
  privateDir(dirname(path));
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, content, { mode: 0o600 });
  renameSync(temp, path);
}
