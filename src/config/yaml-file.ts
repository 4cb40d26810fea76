import { isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from "yaml";
import { ConfigFile, type Path, readConfigText } from "./config-file.js";

/** A YAML file (troupe.yaml, an agent) with its positions kept, for `file:line:col` problems. */
export class YamlFile extends ConfigFile {
  readonly data: unknown;
  readonly #doc: ReturnType<typeof parseDocument>;
  readonly #lines = new LineCounter();

  /** `path` is shown relative to `cwd` when it lies inside it. */
  constructor(path: string, text: string, cwd: string = process.cwd()) {
    super(path, cwd);
    this.#doc = parseDocument(text, { lineCounter: this.#lines, prettyErrors: false, uniqueKeys: true });
    // One problem a place: the parser often reports a mistake twice, in its own words.
    const seen = new Set<number>();
    for (const error of this.#doc.errors) {
      const line = this.#lines.linePos(error.pos[0]).line;
      if (seen.has(line)) continue;
      seen.add(line);
      this.problems.push(this.problemAt(error.pos[0], "", syntaxProblem(error.code, error.message)));
    }
    this.data = this.problems.length === 0 ? this.#doc.toJS() : undefined;
  }

  static read(path: string, cwd?: string): YamlFile {
    return new YamlFile(path, readConfigText(path, cwd), cwd);
  }

  protected position(offset: number): { line: number; col: number } {
    return this.#lines.linePos(offset);
  }

  protected offsetOf(path: Path, at: "key" | "value"): number {
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
}

function rangeStart(node: unknown): number | undefined {
  return (node as Node | null | undefined)?.range?.[0];
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
