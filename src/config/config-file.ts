import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { relative } from "node:path";
import type { z } from "zod";
import { didYouMean } from "../util/did-you-mean.js";

/** Keys other tools take that Troupe spells otherwise on purpose, with what to write instead. */
const KEY_HINTS: Record<string, string> = {
  apiKey:
    ": a key is never written in troupe.yaml; set apiKeyEnv to the name of the environment variable that holds it",
  api_key:
    ": a key is never written in troupe.yaml; set apiKeyEnv to the name of the environment variable that holds it",
};

import { ConfigError, type ConfigProblem, formatPath } from "./problems.js";

/** The largest config file read: far more than any config, far less than a device's endless bytes. */
const MAX_CONFIG_BYTES = 4 * 1024 * 1024;

/**
 * A config file's text, read only when it is a regular file once open (opened without blocking: a
 * FIFO or a device a repository's config names must not hang `agents validate` or `trust`), and
 * at most `MAX_CONFIG_BYTES`; otherwise a ConfigError at the file.
 */
export function readConfigText(path: string, cwd: string = process.cwd()): string {
  const shown = relative(cwd, path);
  const refuse = (message: string) =>
    new ConfigError([
      { file: shown && !shown.startsWith("..") ? shown : path, line: 1, col: 1, path: "", message },
    ]);
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) throw refuse("not a regular file: a config file is a file of its own");
    if (info.size > MAX_CONFIG_BYTES)
      throw refuse(`larger than ${MAX_CONFIG_BYTES / 1024 / 1024} MB: not a config file`);
    const buffer = Buffer.alloc(info.size);
    let filled = 0;
    for (let read = 1; read > 0 && filled < buffer.length; filled += read)
      read = readSync(fd, buffer, filled, buffer.length - filled, null);
    return buffer.subarray(0, filled).toString("utf8");
  } finally {
    closeSync(fd);
  }
}

export type Path = ReadonlyArray<PropertyKey>;

/**
 * A config file parsed with its positions kept, so any problem found later (by zod or by a
 * cross-file check) can point at the line and column of the key or value it is about. Each format
 * says where a path is in its text; what a problem says is the same for all.
 */
export abstract class ConfigFile {
  abstract readonly data: unknown;
  readonly problems: ConfigProblem[] = [];

  /** `path` is shown relative to `cwd` when it lies inside it. */
  constructor(
    readonly path: string,
    private readonly cwd: string = process.cwd(),
  ) {}

  /** Where the value under `path` (or its key) starts, or the nearest parent that exists. */
  protected abstract offsetOf(path: Path, at: "key" | "value"): number;
  /** The 1-based line and column of an offset in the text. */
  protected abstract position(offset: number): { line: number; col: number };

  /** Where the file is shown in messages. */
  get displayPath(): string {
    const rel = relative(this.cwd, this.path);
    return rel && !rel.startsWith("..") ? rel : this.path;
  }

  /** A problem at the value under `path` (or its key, with `at: "key"`), or at the nearest parent that exists. */
  problem(path: Path, message: string, at: "key" | "value" = "value"): ConfigProblem {
    return this.problemAt(this.offsetOf(path, at), formatPath(path), message);
  }

  /** `file:line:col` of the value under `path`. */
  where(path: Path): string {
    const { line, col } = this.position(this.offsetOf(path, "value"));
    return `${this.displayPath}:${line}:${col}`;
  }

  /** Checks the data with a schema; problems are recorded and undefined returned when it fails. */
  validate<S extends z.ZodType>(schema: S): z.infer<S> | undefined {
    if (this.data === undefined) return undefined;
    const parsed = schema.safeParse(this.data ?? {});
    if (parsed.success) return parsed.data;
    for (const issue of parsed.error.issues) {
      if (issue.code === "unrecognized_keys") {
        const known = knownKeys(schema, issue.path);
        for (const key of issue.keys) {
          this.problems.push(
            this.problem(
              [...issue.path, key],
              `unknown key${KEY_HINTS[key] ?? didYouMean(key, known)}`,
              "key",
            ),
          );
        }
      } else {
        this.problems.push(this.problem(issue.path, this.#describe(issue)));
      }
    }
    return undefined;
  }

  #describe(issue: z.core.$ZodIssue): string {
    // A short form (`sandbox: read-only` for `sandbox: { mode: read-only }`) holds the value above its path.
    const value = valueAt(this.data, issue.path) ?? scalarAbove(this.data, issue.path);
    switch (issue.code) {
      case "invalid_type":
        if (value === undefined) return "is required";
        // A schema that says what it wants in words is clearer than the type it checks.
        if (!issue.message.startsWith("Invalid input"))
          return `${issue.message}; got ${JSON.stringify(value)}`;
        return `expected ${article(issue.expected)}, got ${article(kindOf(value))}`;
      case "invalid_value":
        return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}; got ${JSON.stringify(value)}`;
      case "too_small":
        return `must be ${issue.inclusive ? "at least" : "more than"} ${String(issue.minimum)}`;
      case "too_big":
        return `must be ${issue.inclusive ? "at most" : "less than"} ${String(issue.maximum)}`;
      case "invalid_format":
        return issue.message.startsWith("Invalid") ? `must be a valid ${issue.format}` : issue.message;
      default:
        return issue.message;
    }
  }

  protected problemAt(offset: number, path: string, message: string): ConfigProblem {
    const { line, col } = this.position(offset);
    return { file: this.displayPath, line, col, path, message };
  }
}

function valueAt(data: unknown, path: Path): unknown {
  let value = data;
  for (const part of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  return value;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "list";
  if (typeof value === "object") return "mapping";
  return typeof value;
}

function article(kind: string): string {
  const names: Record<string, string> = {
    object: "mapping",
    array: "list",
    record: "mapping",
    int: "integer",
  };
  const name = names[kind] ?? kind;
  return `${/^[aeiou]/.test(name) ? "an" : "a"} ${name}`;
}

/** The keys a strict object schema accepts at `path`, for "did you mean". */
function knownKeys(schema: z.ZodType, path: Path): string[] {
  let current: unknown = schema;
  for (const part of [...path, undefined]) {
    current = unwrap(current);
    const def = (
      current as {
        def?: { type?: string; shape?: Record<string, unknown>; valueType?: unknown; element?: unknown };
      }
    ).def;
    if (part === undefined) return def?.shape ? Object.keys(def.shape) : [];
    if (def?.type === "object") current = def.shape?.[String(part)];
    else if (def?.type === "record") current = def.valueType;
    else if (def?.type === "array") current = def.element;
    else return [];
  }
  return [];
}

function unwrap(schema: unknown): unknown {
  let current = schema as
    | { def?: { type?: string; innerType?: unknown; in?: unknown; schema?: unknown } }
    | undefined;
  for (let i = 0; i < 10 && current?.def; i++) {
    const def = current.def;
    if (
      def.type === "optional" ||
      def.type === "default" ||
      def.type === "nullable" ||
      def.type === "prefault"
    ) {
      current = def.innerType as typeof current;
    } else if (def.type === "pipe") {
      current = def.in as typeof current;
    } else {
      break;
    }
  }
  return current;
}

/** The nearest value above `path` that is not an object: what a short form was written as. */
function scalarAbove(data: unknown, path: readonly PropertyKey[]): unknown {
  for (let end = path.length - 1; end > 0; end--) {
    const value = valueAt(data, path.slice(0, end));
    if (value !== undefined && (value === null || typeof value !== "object")) return value;
  }
  return undefined;
}
