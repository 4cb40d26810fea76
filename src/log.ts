import { createRequire } from "node:module";
import { Writable } from "node:stream";
import pino, { type Level, type Logger } from "pino";

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
 * lost when a CLI command exits right after logging.
 */
export function createLogger(options: LoggerOptions = {}): Logger {
  const level = options.level ?? "info";
  const destination = options.destination ?? process.stderr;
  const pretty = options.pretty ?? (destination === process.stderr && process.stderr.isTTY === true);
  const hooks = options.redact ? { hooks: { streamWrite: options.redact } } : {};
  if (pretty) {
    const prettyStream = createRequire(import.meta.url)("pino-pretty") as typeof import("pino-pretty");
    return pino(
      { level, ...hooks },
      prettyStream({ destination: destination as Writable, sync: true, ignore: "pid,hostname" }),
    );
  }
  return pino({ level, base: undefined, ...hooks }, destination as Writable);
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
