import { readFile } from "node:fs/promises";
import { UserError } from "../errors.js";

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

async function readTaskFile(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new TaskInputError(
      `--file ${path}: ${code === "ENOENT" ? "no such file" : (error as Error).message}`,
    );
  }
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}
