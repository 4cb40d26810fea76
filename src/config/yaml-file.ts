import { readFileSync } from "node:fs";
import { relative } from "node:path";
import { isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from "yaml";
import type { z } from "zod";
import { didYouMean } from "../util/did-you-mean.js";
import { type ConfigProblem, formatPath } from "./problems.js";

type Path = ReadonlyArray<PropertyKey>;

/**
 * A YAML file parsed with its positions kept, so any problem found later (by zod or by a
 * cross-file check) can point at the line and column of the key or value it is about.
 */
export class YamlFile {
  readonly data: unknown;
  readonly problems: ConfigProblem[] = [];
  readonly #doc: ReturnType<typeof parseDocument>;
  readonly #lines = new LineCounter();

  /** `path` is shown relative to `cwd` when it lies inside it. */
  constructor(
    readonly path: string,
    text: string,
    private readonly cwd: string = process.cwd(),
  ) {
    this.#doc = parseDocument(text, { lineCounter: this.#lines, prettyErrors: false, uniqueKeys: true });
    // One problem a place: the parser often reports a mistake twice, in its own words.
    const seen = new Set<number>();
    for (const error of this.#doc.errors) {
      const line = this.#lines.linePos(error.pos[0]).line;
      if (seen.has(line)) continue;
      seen.add(line);
      this.problems.push(this.#problemAt(error.pos[0], "", syntaxProblem(error.code, error.message)));
    }
    this.data = this.problems.length === 0 ? this.#doc.toJS() : undefined;
  }

  static read(path: string, cwd?: string): YamlFile {
    return new YamlFile(path, readFileSync(path, "utf8"), cwd);
  }

  /** Where the file is shown in messages. */
  get displayPath(): string {
    const rel = relative(this.cwd, this.path);
    return rel && !rel.startsWith("..") ? rel : this.path;
  }

  /** A problem at the value under `path` (or its key, with `at: "key"`), or at the nearest parent that exists. */
  problem(path: Path, message: string, at: "key" | "value" = "value"): ConfigProblem {
    return this.#problemAt(this.#offset(path, at), formatPath(path), message);
  }

  /** `file:line:col` of the value under `path`. */
  where(path: Path): string {
    const { line, col } = this.#lines.linePos(this.#offset(path, "value"));
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
            this.problem([...issue.path, key], `unknown key${didYouMean(key, known)}`, "key"),
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

  #offset(path: Path, at: "key" | "value"): number {
    let node: unknown = this.#doc.contents;
    let offset = rangeStart(node) ?? 0;
    for (let i = 0; i < path.length; i++) {
      const part = path[i];
      const last = i === path.length - 1;
      if (isMap(node)) {
        const pair = node.items.find((item) => isPair(item) && isScalar(item.key) && item.key.value === part);
        if (!pair) return offset;
        offset =
          (last && at === "key" ? rangeStart(pair.key) : (rangeStart(pair.value) ?? rangeStart(pair.key))) ??
          offset;
        node = pair.value;
      } else if (isSeq(node) && typeof part === "number") {
        const item = node.items[part];
        if (item === undefined) return offset;
        offset = rangeStart(item) ?? offset;
        node = item;
      } else {
        return offset;
      }
    }
    return offset;
  }

  #problemAt(offset: number, path: string, message: string): ConfigProblem {
    const { line, col } = this.#lines.linePos(offset);
    return { file: this.displayPath, line, col, path, message };
  }
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | null | undefined)?.range?.[0];
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

/** A parser error as one line that says how to mend it, for the mistakes people make most. */
function syntaxProblem(code: string, message: string): string {
  switch (code) {
    case "DUPLICATE_KEY":
      return "duplicate key";
    case "TAB_AS_INDENT":
      return "a tab indents this line: YAML indents with spaces only";
    case "BLOCK_AS_IMPLICIT_KEY":
    case "MULTILINE_IMPLICIT_KEY":
      return 'a value holds ": ", or this line is indented under a plain value: put the value in quotes ("a: b"), or line the key up with the ones above';
    case "BAD_INDENT":
    case "MISSING_CHAR":
      return `YAML syntax: ${firstLine(message)}; keys of one level line up, with spaces`;
    default:
      return `YAML syntax: ${firstLine(message)}`;
  }
}

function firstLine(text: string): string {
  return text.split("\n")[0]?.replace(/ at line \d+, column \d+:?$/, "") ?? text;
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
