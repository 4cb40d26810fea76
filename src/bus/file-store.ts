import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
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
 * The largest event log read. A run of 50 turns that each stream a reply at the cap
 * (`MAX_REPLY_CHARS`) logs some 200 MiB; past this, reading it would hold more than a command should,
 * and one line could pass the longest string Node makes.
 */
export const MAX_EVENT_LOG_BYTES = 256 * 1024 * 1024;

/** The bytes read at a time from an event log. */
const CHUNK_BYTES = 1024 * 1024;

/**
 * A run's event log that is not read: larger than `MAX_EVENT_LOG_BYTES`, not a file, or refused by
 * the system. Says which run and which directory to remove to forget it.
 */
export class EventLogUnreadableError extends UserError {
  override name = "EventLogUnreadableError";
  constructor(
    readonly runId: string,
    readonly dir: string,
    why: string,
    options?: ErrorOptions,
  ) {
    super(`run ${runId}'s event log ${why}: remove ${dir} to forget the run`, options);
  }
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

  /**
   * The run's events, a line's bytes at a time, as far as the log reached when this was called; or
   * undefined when this store has none. The log is read a chunk at a time, never as one string. One
   * over `MAX_EVENT_LOG_BYTES`, not a file, or that cannot be read throws `EventLogUnreadableError`,
   * here or as it is read.
   */
  eventLines(runId: string): Iterable<Uint8Array> | undefined {
    const dir = this.runDir(runId);
    const file = join(dir, "events.jsonl");
    const unreadable = (why: string, cause?: unknown) =>
      new EventLogUnreadableError(runId, dir, why, cause === undefined ? undefined : { cause });
    let stats: Stats;
    try {
      stats = statSync(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw unreadable(refusal(error), error);
    }
    if (!stats.isFile()) throw unreadable("is not a file");
    if (stats.size > MAX_EVENT_LOG_BYTES)
      throw unreadable(
        `is ${mebibytes(stats.size)}, more than the ${mebibytes(MAX_EVENT_LOG_BYTES)} Troupe reads`,
      );
    return linesOf(file, stats.size, unreadable);
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

/** The lines of the first `size` bytes of `file`, opened when the first is asked for. */
function* linesOf(
  file: string,
  size: number,
  unreadable: (why: string, cause: unknown) => Error,
): Generator<Uint8Array> {
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (error) {
    throw unreadable(refusal(error), error);
  }
  const chunk = Buffer.alloc(Math.max(1, Math.min(CHUNK_BYTES, size)));
  let pending: Buffer[] = [];
  try {
    for (let at = 0; at < size; ) {
      let got: number;
      try {
        got = readSync(fd, chunk, 0, Math.min(chunk.length, size - at), at);
      } catch (error) {
        throw unreadable(refusal(error), error);
      }
      if (got === 0) break;
      at += got;
      let start = 0;
      for (let end = chunk.indexOf(10, start); end !== -1 && end < got; end = chunk.indexOf(10, start)) {
        // A copy: the chunk is read into again.
        const line = Buffer.concat([...pending, chunk.subarray(start, end)]);
        pending = [];
        if (line.length > 0) yield line;
        start = end + 1;
      }
      if (start < got) pending.push(Buffer.from(chunk.subarray(start, got)));
    }
    const last = Buffer.concat(pending);
    if (last.length > 0) yield last;
  } finally {
    closeSync(fd);
  }
}

const refusal = (error: unknown): string =>
  `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`;

const mebibytes = (bytes: number): string => `${Math.ceil(bytes / (1024 * 1024))} MiB`;

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
