import { randomBytes } from "node:crypto";
import { constants } from "node:fs";
import { lstat, mkdir, open, realpath, rename, unlink } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { TroupeError } from "../errors.js";

/** A path changed between its check and its use: a parent became a symlink, or the file was swapped. */
export class PathChangedError extends TroupeError {
  override name = "PathChangedError";
}

// O_EXCL with O_CREAT refuses a name that exists, a symlink included; O_NOFOLLOW says so once more.
const CREATE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

/**
 * Writes `content` as the file at `real`, a path the workspace guard resolved, by creating a new file
 * beside it and renaming it over the target. The target is replaced, never written through: a symlink
 * swapped in for it after the check is replaced itself, and a hard link's other names keep the old
 * text. Throws `PathChangedError` when the parent no longer resolves to itself, or the new file is not
 * the one opened. The old file's permission bits are kept (not setuid/setgid, which a write drops).
 */
export async function replaceFile(real: string, content: string | Uint8Array): Promise<void> {
  const parent = dirname(real);
  await makeParents(parent);
  const temp = join(parent, `.${basename(real)}.${randomBytes(6).toString("hex")}.troupe-tmp`);
  const handle = await open(temp, CREATE_FLAGS, 0o666);
  let renamed = false;
  try {
    await handle.writeFile(content);
    const old = await lstat(real).catch(() => undefined);
    if (old?.isFile()) await handle.chmod(old.mode & 0o777);
    const opened = await handle.stat();
    await handle.close();
    await expectReal(parent);
    const created = await lstat(temp);
    if (created.dev !== opened.dev || created.ino !== opened.ino)
      throw new PathChangedError(`the file written for ${real} was swapped before it was put in place`);
    await rename(temp, real);
    renamed = true;
  } finally {
    await handle.close().catch(() => undefined);
    if (!renamed) await unlink(temp).catch(() => undefined);
  }
}

/**
 * Removes the file at `real`, a path the workspace guard resolved, after checking its parent still
 * resolves to itself (unlink removes a symlink or one hard link, never what they lead to).
 */
export async function removeFile(real: string): Promise<void> {
  await expectReal(dirname(real));
  await unlink(real).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "ENOENT") throw error;
  });
}

/** Creates `dir` and its missing parents one level at a time, each under a parent that is still real. */
async function makeParents(dir: string): Promise<void> {
  const missing: string[] = [];
  let existing = dir;
  while (!(await lstat(existing).catch(() => undefined))) {
    missing.unshift(existing);
    const up = dirname(existing);
    if (up === existing) break;
    existing = up;
  }
  await expectReal(existing);
  for (const level of missing) {
    await expectReal(dirname(level));
    await mkdir(level).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
    });
  }
  await expectReal(dir);
}

async function expectReal(dir: string): Promise<void> {
  const now = await realpath(dir);
  if (now !== dir) throw new PathChangedError(`${dir} now leads to ${now}`);
}
