import { spawn } from "node:child_process";
import * as fs from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, expect, it, vi } from "vitest";
import { FileStore } from "../../src/bus/file-store.js";
import { exited, tempTree } from "../support/cli.js";
import { waitFor } from "../support/wait.js";

// Every fsync the store makes (of a file or of a directory) and every rename, in the order made.
const synced = vi.hoisted(() => [] as string[]);
vi.mock("node:fs", async (original) => {
  const real = await original<typeof import("node:fs")>();
  return {
    ...real,
    fsyncSync: (fd: number) => {
      synced.push(real.fstatSync(fd).isDirectory() ? "fsync directory" : "fsync file");
      real.fsyncSync(fd);
    },
    renameSync: (from: fs.PathLike, to: fs.PathLike) => {
      synced.push("rename");
      real.renameSync(from, to);
    },
  };
});

const disposers: Array<() => void> = [];
afterEach(() => {
  for (const dispose of disposers.splice(0)) dispose();
});

/** The built FileStore, as another process runs it (`npm test` builds first). */
const BUILT = pathToFileURL(resolve("dist/bus/file-store.js")).href;

it("a value's file is never seen half written: not by a reader while it is written, not after its writer is killed", async () => {
  const { dir, dispose } = tempTree({});
  disposers.push(dispose);
  // A writer that puts two large values in turn under one key, as fast as it can.
  const writer = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `const { FileStore } = await import(${JSON.stringify(BUILT)});
       const store = new FileStore(${JSON.stringify(dir)});
       const values = ["a", "b"].map((c) => ({ json: JSON.stringify(c.repeat(4_000_000)), revision: 1 }));
       for (let i = 0; ; i++) store.saveValue("snapshots", "run.agent", values[i % 2]);`,
    ],
    { stdio: "ignore" },
  );
  const file = join(dir, "kv", "snapshots", `${encodeURIComponent("run.agent")}.json`);
  const whole = (text: string) => {
    const value = JSON.parse(JSON.parse(text).json) as string;
    return value.length === 4_000_000 && (value === "a".repeat(4_000_000) || value === "b".repeat(4_000_000));
  };
  await waitFor("the first value", () => fs.existsSync(file), 10_000);
  // Read for 1.5 s, and at least six times however busy the machine is.
  let reads = 0;
  const until = Date.now() + 1500;
  while (Date.now() < until || reads < 6) {
    expect(whole(fs.readFileSync(file, "utf8"))).toBe(true);
    reads++;
  }
  writer.kill("SIGKILL");
  await exited(writer);
  expect(whole(fs.readFileSync(file, "utf8"))).toBe(true);
  expect(new FileStore(dir).loadValues("snapshots")).toHaveLength(1);
}, 20_000);

it("fsyncs a value, renames it into place, then fsyncs its directory, so the rename is on disk too", () => {
  const { dir, dispose } = tempTree({});
  disposers.push(dispose);
  synced.length = 0;
  new FileStore(dir).saveValue("approvals", "k", { json: "{}", revision: 1 });
  expect(synced).toEqual(["fsync file", "rename", "fsync directory"]);
});

it("reads a run's log a line at a time, whole lines across its chunks, as far as it reached when asked", () => {
  const { dir, dispose } = tempTree({});
  disposers.push(dispose);
  const store = new FileStore(dir);
  // A line longer than a chunk (1 MiB), multi-byte characters cut by a chunk's end, a blank line,
  // and a last line with no newline (an append cut short).
  const lines = [`${"x".repeat(1024 * 1024 - 1)}é€`, "short", "😀".repeat(300_000), "", "tail"];
  fs.mkdirSync(store.runDir("run1"), { recursive: true });
  fs.writeFileSync(join(store.runDir("run1"), "events.jsonl"), lines.join("\n"));
  const read = store.eventLines("run1");
  fs.appendFileSync(join(store.runDir("run1"), "events.jsonl"), "\nlater");
  const decoder = new TextDecoder();
  expect([...(read ?? [])].map((line) => decoder.decode(line))).toEqual(lines.filter(Boolean));
  expect(store.eventLines("no-such-run")).toBeUndefined();
});
