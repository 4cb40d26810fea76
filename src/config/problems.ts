import { UserError } from "../errors.js";

/** One thing wrong in the user's config, where it is, and (in the message) how to mend it. */
export interface ConfigProblem {
  file: string;
  line: number;
  col: number;
  /** The key path, e.g. `tools[2]` or `budget.maxTurns`; empty for the whole file. */
  path: string;
  message: string;
}

/** Bad config: every problem found, in file order, each printed as one `file:line:col: path: message` line. */
export class ConfigError extends UserError {
  override name = "ConfigError";
  readonly problems: ConfigProblem[];
  constructor(problems: ConfigProblem[]) {
    const sorted = [...problems].sort(
      (a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.col - b.col,
    );
    super(sorted.map(formatProblem).join("\n"));
    this.problems = sorted;
  }
}

export function formatProblem(problem: ConfigProblem): string {
  const where = `${problem.file}:${problem.line}:${problem.col}`;
  return problem.path ? `${where}: ${problem.path}: ${problem.message}` : `${where}: ${problem.message}`;
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}
