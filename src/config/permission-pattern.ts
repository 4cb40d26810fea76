/*
 * The patterns of troupe.yaml's `permissions: { allow, deny }`: what they may say, parsed once.
 *
 *   TOOL             every call of the tool; `*` in the name stands for any text (`github__*`)
 *   shell(PREFIX)    a command; `*` stands for any text, and a pattern ending in ` *` also
 *                    matches the command without that ending (`git status *`: `git status`,
 *                    `git status --short`, never `git statusx`)
 *   FILE_TOOL(GLOB)  read_file, list_dir, write_file, edit_file: the workspace-relative path the
 *                    call would touch, after `..` and links; `*` any text within a segment, `?` one
 *                    character, `**` any number of segments (`docs/**`)
 *
 * Matching a call against them is src/approvals/permissions.ts's.
 */

/** The tools whose calls an argument pattern is matched on, and which argument. */
export const PATTERN_ARGUMENT = {
  shell: "command",
  read_file: "path",
  list_dir: "path",
  write_file: "path",
  edit_file: "path",
} as const;
export type PatternTool = keyof typeof PATTERN_ARGUMENT;

export interface PermissionPattern {
  /** As written in troupe.yaml. */
  text: string;
  /** Matches the tool's name. */
  tool: RegExp;
  /** The argument pattern, when there is one: the tool is then one of PATTERN_ARGUMENT's. */
  argument?: { of: "command" | "path"; matches: RegExp };
}

const TOOL_NAME = /^[A-Za-z0-9_*-]+$/;

/** Why `text` is no pattern, in a line that says how to write it; undefined when it is one. */
export function patternProblem(text: string): string | undefined {
  const parsed = parse(text);
  return typeof parsed === "string" ? parsed : undefined;
}

/** The pattern `text` says; throws for one `patternProblem` refuses (the config schema refused it first). */
export function parsePattern(text: string): PermissionPattern {
  const parsed = parse(text);
  if (typeof parsed === "string") throw new TypeError(`not a permission pattern: ${text}: ${parsed}`);
  return parsed;
}

function parse(text: string): PermissionPattern | string {
  const open = text.indexOf("(");
  const name = open === -1 ? text : text.slice(0, open);
  if (!TOOL_NAME.test(name))
    return 'must be a tool name, with "*" for any text (github__*), and an argument in parentheses for shell or a file tool: shell(git status *), write_file(docs/**)';
  const tool = new RegExp(`^${name.split("*").map(escapeRegExp).join(".*")}$`);
  if (open === -1) return { text, tool };
  if (!text.endsWith(")")) return `the argument pattern ends with ")": ${name}(${text.slice(open + 1)})`;
  const argument = text.slice(open + 1, -1).trim();
  if (argument === "") return `an empty argument pattern matches nothing: write ${name} alone for every call`;
  if (!Object.hasOwn(PATTERN_ARGUMENT, name))
    return `${name} takes no argument pattern (only shell, for its command, and ${Object.keys(PATTERN_ARGUMENT).slice(1).join(", ")}, for their path): write ${name} alone for every call`;
  const of = PATTERN_ARGUMENT[name as PatternTool];
  if (of === "command") return { text, tool, argument: { of, matches: commandGlob(argument) } };
  const problem = pathPatternProblem(argument);
  if (problem) return problem;
  return { text, tool, argument: { of, matches: pathGlob(argument) } };
}

function pathPatternProblem(glob: string): string | undefined {
  const segments = glob.split("/");
  if (glob.startsWith("/") || glob.startsWith("~") || glob.includes("\\"))
    return `a path pattern is relative to the workspace, with "/" between names: write ${glob.replace(/^[/~]+/, "").replaceAll("\\", "/") || "docs/**"}`;
  if (segments.some((segment) => segment === "" || segment === "." || segment === ".."))
    return 'a path pattern names the path the tool touches, without ".", ".." or empty segments: e.g. docs/**';
  return undefined;
}

/** Whitespace runs count as one space, as in the command's words joined. */
export function normalCommand(command: string): string {
  return command.trim().replace(/\s+/g, " ");
}

function commandGlob(pattern: string): RegExp {
  const normal = normalCommand(pattern);
  const trailing = normal.endsWith(" *") && normal.length > 2;
  const body = trailing ? normal.slice(0, -2) : normal;
  const source = body.split("*").map(escapeRegExp).join("[^]*");
  return new RegExp(`^${source}${trailing ? "(?: [^]*)?" : ""}$`);
}

function pathGlob(glob: string): RegExp {
  const segments = glob.split("/");
  let source = "";
  segments.forEach((segment, at) => {
    const after = at > 0 && segments[at - 1] !== "**" ? "/" : "";
    if (segment !== "**") source += after + segmentSource(segment);
    // Last, `**` is the path above itself or anything under it (`docs/**`: `docs`, `docs/a/b`);
    // elsewhere any number of whole segments, each with its slash (`**/x`, `a/**/x`).
    else if (at === segments.length - 1) source += at === 0 ? "[^]*" : "(?:/[^]*)?";
    else source += `${after}(?:[^/]+/)*`;
  });
  return new RegExp(`^${source}$`);
}

function segmentSource(segment: string): string {
  return segment
    .split(/(\*|\?)/)
    .map((piece) => (piece === "*" ? "[^/]*" : piece === "?" ? "[^/]" : escapeRegExp(piece)))
    .join("");
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
