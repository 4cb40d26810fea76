import { getNodeValue, type Node, type ParseError, parseTree, printParseErrorCode } from "jsonc-parser";
import { ConfigFile, type Path, readConfigText } from "./config-file.js";

/**
 * A JSON file of another client (Claude Code's `.mcp.json`, VS Code's `.vscode/mcp.json`) with its
 * positions kept, for `file:line:col` problems. Read as VS Code reads it: comments and trailing commas
 * are allowed.
 */
export class JsonFile extends ConfigFile {
  readonly data: unknown;
  readonly #root: Node | undefined;
  /** The offset each line starts at. */
  readonly #lineStarts: number[] = [0];

  constructor(path: string, text: string, cwd: string = process.cwd()) {
    super(path, cwd);
    for (let i = 0; i < text.length; i++) if (text[i] === "\n") this.#lineStarts.push(i + 1);
    const errors: ParseError[] = [];
    this.#root = parseTree(text, errors, { allowTrailingComma: true, disallowComments: false });
    // The first mistake: the parser's later ones mostly follow from it.
    const first = errors[0];
    if (first) this.problems.push(this.problemAt(first.offset, "", syntaxProblem(first)));
    this.data = first || !this.#root ? undefined : getNodeValue(this.#root);
    if (!first && !this.#root)
      this.problems.push(this.problemAt(0, "", "the file is empty: expected a JSON object"));
  }

  static read(path: string, cwd?: string): JsonFile {
    return new JsonFile(path, readConfigText(path, cwd), cwd);
  }

  protected position(offset: number): { line: number; col: number } {
    let low = 0;
    let high = this.#lineStarts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if ((this.#lineStarts[mid] as number) <= offset) low = mid;
      else high = mid - 1;
    }
    return { line: low + 1, col: offset - (this.#lineStarts[low] as number) + 1 };
  }

  protected offsetOf(path: Path, at: "key" | "value"): number {
    let node = this.#root;
    let offset = node?.offset ?? 0;
    for (let i = 0; i < path.length; i++) {
      const part = path[i];
      const last = i === path.length - 1;
      if (node?.type === "object") {
        const property = node.children?.find((child) => child.children?.[0]?.value === part);
        const [key, value] = property?.children ?? [];
        if (!key) return offset;
        offset = (last && at === "key" ? key.offset : (value?.offset ?? key.offset)) ?? offset;
        node = value;
      } else if (node?.type === "array" && typeof part === "number") {
        const item = node.children?.[part];
        if (!item) return offset;
        offset = item.offset;
        node = item;
      } else {
        return offset;
      }
    }
    return offset;
  }
}

const SYNTAX: Record<string, string> = {
  CommaExpected: "a comma is missing before this",
  ColonExpected: 'a ":" is missing after the key',
  PropertyNameExpected: "a key in double quotes is expected here",
  ValueExpected: "a value is expected here",
  CloseBraceExpected: 'a "}" is missing',
  CloseBracketExpected: 'a "]" is missing',
  EndOfFileExpected: "the file should end after the closing }",
  UnexpectedEndOfString: "a string is not closed with a double quote",
  InvalidSymbol: "this is not JSON (strings and keys take double quotes)",
};

function syntaxProblem(error: ParseError): string {
  const code = printParseErrorCode(error.error);
  return `JSON syntax: ${SYNTAX[code] ?? code.replace(/([a-z])([A-Z])/g, "$1 $2").toLowerCase()}`;
}
