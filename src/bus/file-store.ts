import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { UserError } from "../errors.js";
import { isToken } from "./subjects.js";

/** A run id given (to inspect, resume, replay…) that is not one: it would name a path out of the store. */
export class InvalidRunIdError extends UserError {
  override name = "InvalidRunIdError";
}

/**
 * Where LocalBus keeps what must outlive the process in the embedded mode: each run's event log as
 * append-only JSONL, and KV values as one file per key, written to a temporary file, fsynced, then
 * renamed, and the directory fsynced (a crash leaves the old value or the new one, never half of one,
 * and a reader at any moment sees one or the other). Directories are 0700 and
 * files 0600: they hold conversations.
 */
export class FileStore {
  constructor(readonly root: string) {
    mkdirSync(root, { recursive: true, mode: 0o700 });
  }

  runs(): string[] {
    const dir = join(this.root, "runs");
    return existsSync(dir) ? readdirSync(dir).sort() : [];
  }

  /** A run's directory: its id is a plain name, as on the bus, never a path (`../..`) out of the store. */
  runDir(runId: string): string {
    if (!isToken(runId))
      throw new InvalidRunIdError(
        `run id "${runId}" is not one: a run id is letters, digits, "_" and "-" (troupe runs lists them)`,
      );
    return join(this.root, "runs", runId);
  }

  appendEvent(runId: string, line: string): void {
    const dir = this.runDir(runId);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    appendFileSync(join(dir, "events.jsonl"), `${line}\n`, { mode: 0o600 });
  }

  /** The run's events as lines, or undefined when this store has none. */
  loadEvents(runId: string): string[] | undefined {
    const file = join(this.runDir(runId), "events.jsonl");
    if (!existsSync(file)) return undefined;
    return readFileSync(file, "utf8").split("\n").filter(Boolean);
  }

  saveValue(bucket: string, key: string, record: { json: string; revision: number }): void {
    const dir = join(this.root, "kv", bucket);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const file = join(dir, `${encodeURIComponent(key)}.json`);
    const temporary = `${file}.${process.pid}.tmp`;
    const fd = openSync(temporary, "w", 0o600);
    try {
      writeSync(fd, JSON.stringify(record));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temporary, file);
    syncDirectory(dir);
  }

  deleteValue(bucket: string, key: string): void {
    rmSync(join(this.root, "kv", bucket, `${encodeURIComponent(key)}.json`), { force: true });
  }

  loadValues(bucket: string): Array<{ key: string; json: string; revision: number }> {
    const dir = join(this.root, "kv", bucket);
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((name) => name.endsWith(".json"))
      .map((name) => {
        const record = JSON.parse(readFileSync(join(dir, name), "utf8")) as {
          json: string;
          revision: number;
        };
        return { key: decodeURIComponent(name.slice(0, -".json".length)), ...record };
      });
  }
}

/**
 * Makes a rename in `dir` survive a crash of the machine: the new name is in the directory's own
 * data, which an fsync of the directory writes out. Windows cannot open a directory to sync it.
 */
function syncDirectory(dir: string): void {
  if (process.platform === "win32") return;
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
