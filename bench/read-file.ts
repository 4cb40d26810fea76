/**
 * read_file on a large log: a 200 MB file of about 2.8 million lines, line 2,000,000 read through the
 * tool's `execute` (workspace guard, confined open, the line index). Cold: the file's index is made
 * on this read (the file was touched, so the kept one no longer holds); warm: the index is reused.
 * The file is in the page cache either way: what is measured is the tool's work, not the disk's.
 */
import { closeSync, mkdtempSync, openSync, rmSync, utimesSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readFileTool } from "../src/tools/builtin/read-tools.js";
import { whenRunAsScript } from "./processes.js";

export interface ReadFileResult {
  /** Size of the file, MB. */
  megabytes: number;
  lines: number;
  /** Median ms of a read of line 2,000,000 that makes the index, and of one that reuses it. */
  coldMs: number;
  warmMs: number;
}

const TARGET_BYTES = 200 * 1000 * 1000;
const LINE = 2_000_000;

/** Writes lines of about 72 bytes until the file holds `TARGET_BYTES`; returns how many. */
function writeLog(path: string): number {
  const fd = openSync(path, "w");
  let lines = 0;
  let written = 0;
  try {
    while (written < TARGET_BYTES) {
      const batch: string[] = [];
      for (let i = 0; i < 10_000; i++, lines++)
        batch.push(
          `2026-12-01T10:00:00.${String(lines % 1000).padStart(3, "0")}Z INFO worker-${lines % 16} handled request ${lines} in 12 ms`,
        );
      written += writeSync(fd, `${batch.join("\n")}\n`);
    }
  } finally {
    closeSync(fd);
  }
  return lines;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

export async function measureReadFile(reps: number): Promise<ReadFileResult> {
  const workspace = mkdtempSync(join(tmpdir(), "troupe-bench-read-"));
  try {
    const path = join(workspace, "big.log");
    const lines = writeLog(path);
    const context = {
      signal: new AbortController().signal,
      callId: "c",
      runId: "r",
      agentId: "a",
      workspace,
    };
    const read = async (): Promise<number> => {
      const started = performance.now();
      const result = await readFileTool.execute({ path: "big.log", offset: LINE, limit: 1 }, context);
      const ms = performance.now() - started;
      if (!result.output.includes(`handled request ${LINE - 1} in`))
        throw new Error(`read_file did not return line ${LINE}: ${result.output || result.error}`);
      return ms;
    };
    const cold: number[] = [];
    const warm: number[] = [];
    for (let i = 0; i < reps; i++) {
      // A new modification time: the kept index no longer matches, so this read makes it again.
      const when = new Date(Date.now() + i * 1000);
      utimesSync(path, when, when);
      cold.push(await read());
      warm.push(await read());
    }
    return { megabytes: TARGET_BYTES / 1e6, lines, coldMs: median(cold), warmMs: median(warm) };
  } finally {
    rmSync(workspace, { recursive: true, force: true });
  }
}

await whenRunAsScript(import.meta.url, async ([reps = "5"]) => measureReadFile(Number(reps)));
