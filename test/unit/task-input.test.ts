import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { readTask } from "../../src/cli/task-input.js";

/* ATTACK (outside review): `troupe run --file TASK.md` in a cloned repository whose TASK.md is a
 * link to a credentials file sent the whole file to the model as the task; a FIFO there blocked. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});
const tmp = () => {
  const dir = mkdtempSync(join(tmpdir(), "troupe-task-"));
  dirs.push(dir);
  return dir;
};

describe("troupe run --file", () => {
  it("reads a task file", async () => {
    const dir = tmp();
    writeFileSync(join(dir, "TASK.md"), "Fix the build\n");
    expect(await readTask(undefined, join(dir, "TASK.md"))).toBe("Fix the build\n");
  });

  it("does not follow a symbolic link, nor open a FIFO, nor read a file larger than a task", async () => {
    const dir = tmp();
    writeFileSync(join(dir, "credentials"), "aws_secret_access_key = SECRET\n");
    symlinkSync(join(dir, "credentials"), join(dir, "TASK.md"));
    await expect(readTask(undefined, join(dir, "TASK.md"))).rejects.toThrow(/a symbolic link/);
    execFileSync("mkfifo", [join(dir, "fifo")]);
    await expect(readTask(undefined, join(dir, "fifo"))).rejects.toThrow(/not a regular file/);
    writeFileSync(join(dir, "big"), "x".repeat(200_000));
    await expect(readTask(undefined, join(dir, "big"))).rejects.toThrow(/more than a task holds/);
  });
});
