import { constants } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { UserError } from "../errors.js";
import { MAX_TEXT } from "../limits.js";

/** A task given the wrong way: one line, exit 2. */
export class TaskInputError extends UserError {
  override name = "TaskInputError";
}

/**
 * The task of `troupe run`: the argument, stdin for `-`, or the file `--file` names. An empty one, or
 * both an argument and a file, is one line saying how to give it.
 */
export async function readTask(given: string | undefined, file: string | undefined): Promise<string> {
  if (given !== undefined && file !== undefined)
    throw new TaskInputError("give the task or --file, not both");
  const task =
    file !== undefined ? await readTaskFile(file) : given === "-" ? await readStdin() : (given ?? "");
  if (task.trim() === "")
    throw new TaskInputError(
      'say what the agent should do: troupe run "TASK" (or - for stdin, or --file PATH)',
    );
  return task;
}

/**
 * The task file, opened as a file of its own: not through a symbolic link (a repository's TASK.md
 * that leads to a credentials file would send it to the model whole), never a FIFO or a device
 * (which would block), and at most MAX_TEXT characters, as a task from any client.
 */
async function readTaskFile(path: string): Promise<string> {
  let handle: FileHandle | undefined;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const stat = await handle.stat();
    if (!stat.isFile()) throw new TaskInputError(`--file ${path}: not a regular file`);
    if (stat.size > MAX_TEXT * 4)
      throw new TaskInputError(
        `--file ${path}: ${stat.size} bytes, more than a task holds: name the file in the task instead`,
      );
    return await handle.readFile("utf8");
  } catch (error) {
    if (error instanceof TaskInputError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new TaskInputError(
      `--file ${path}: ${code === "ENOENT" ? "no such file" : code === "ELOOP" ? "a symbolic link, which a task file may not be: name the file it leads to" : (error as Error).message}`,
    );
  } finally {
    await handle?.close();
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
