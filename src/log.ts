import { createRequire } from "node:module";
import { Writable } from "node:stream";
import pino, { type Level, type Logger } from "pino";
import { jsonVisible, visible } from "./util/visible.js";

export type { Logger } from "pino";

export const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface LoggerOptions {
  level?: LogLevel;
  /** Human-readable lines; defaults to whether stderr is a terminal. */
  pretty?: boolean;
  /** Where lines go; defaults to stderr, so stdout stays free for a command's own output. */
  destination?: NodeJS.WritableStream;
  /** Applied to every line before it is written. */
  redact?: (line: string) => string;
}

/**
 * The root logger of a process. Components take a child (`log.child({ component: "bus" })`).
 * pino-pretty is loaded only for people at a terminal, and runs in-thread so that nothing is
 * lost when a CLI command exits right after logging. What a line carries from a run (an error, a
 * tool's name, a path) is shown there through `visible`; a JSON line has it escaped (`jsonVisible`).
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? "info";
  const destination = options.destination ?? process.stderr;
  const pretty = options.pretty ?? (destination === process.stderr && process.stderr.isTTY === true);
  const redact = options.redact ?? ((line: string) => line);
  if (pretty) {
    // Every string of a record is shown, never obeyed: pino-pretty prints them as they are.
    const hooks = { hooks: { streamWrite: (line: string) => visibleRecord(redact(line)) } };
    const prettyStream = createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty");
    return pino(
      { level, ...hooks },
      prettyStream({ destination: destination as Writable, sync: true, ignore: "pid,hostname" }),
    );
  }
  // pino ends each record with a newline, which jsonVisible would take as whitespace between tokens.
  const hooks = { hooks: { streamWrite: (line: string) => `${jsonVisible(redact(line))}\n` } };
  return pino({ level, base: undefined, ...hooks }, destination as Writable);
}

/** A JSON log line with every string in it (keys too) as `visible` shows it. */
function visibleRecord(line: string): string {
  try {
    return `${JSON.stringify(visibleDeep(JSON.parse(line)))}\n`;
  } catch {
    return visible(line);
  }
}

function visibleDeep(value: unknown): unknown {
  if (typeof value === "string") return visible(value);
  if (Array.isArray(value)) return value.map(visibleDeep);
  if (value && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [visible(key), visibleDeep(item)]));
  return value;
}

/** A logger that drops everything: the default where a caller passes none. */
export const silentLogger: Logger = pino({ level: "silent" });

export function isLogLevel(value: string): value is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(value);
}

/** Collects JSON log records in memory, for code that must show what it logged. */
export function memoryLogger(level: Level = "debug"): {
  log: Logger;
  records: Array<Record<string, unknown>>;
} {
  const records: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line) records.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level, base: undefined }, sink), records };
}
