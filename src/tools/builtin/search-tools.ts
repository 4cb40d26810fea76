import { realpathSync } from "node:fs";
import { realpath, stat } from "node:fs/promises";
import { extname, join } from "node:path";
import { glob as findFiles } from "tinyglobby";
import { z } from "zod";
import { builtin } from "../../config/tool-catalog.js";
import { isRefusal, readConfined } from "../../safety/confined-read.js";
import { isHidden } from "../../safety/workspace-guard.js";
import { isInside } from "../../util/paths.js";
import { defineTool, type Tool, type ToolContext, type ToolResult, toolError } from "../tool.js";
import { binarySkippedNote, isBinary } from "./file-notes.js";
import { readablePath } from "./guarded.js";
import { LineMatcher, PatternTooSlowError } from "./line-matcher.js";

const IGNORED = ["**/.git/**", "**/node_modules/**", "**/.troupe/**"];
const MAX_GREP_FILE_BYTES = 2 * 1024 * 1024;

/** A `..` as a segment, alone or as one branch of `{a,..}` or `@(..|b)`. */
const PARENT_SEGMENT = /(^|[\\/{,(|])\.\.(?=$|[\\/},)|])/;

/**
 * Patterns are relative to the search path: one that is absolute or climbs with `..` is refused. This
 * is the clear answer; what the pattern finds is still held to the workspace file by file.
 */
function patternError(field: string, pattern: string): ToolResult | undefined {
  if (pattern.startsWith("/") || pattern.startsWith("\\") || pattern.startsWith("~"))
    return toolError(
      `${field} "${pattern}" is absolute; patterns are relative to the search path`,
      `drop the leading part, and set path to the directory in the workspace to search under`,
    );
  if (PARENT_SEGMENT.test(pattern))
    return toolError(
      `${field} "${pattern}" climbs with "..", out of the search path`,
      "use a pattern under the search path, or set path to a directory higher up in the workspace",
    );
  return undefined;
}

/**
 * The files the pattern finds under `root` whose real path is in the workspace: a symlinked directory
 * named in a pattern can lead anywhere, so each result is judged by where it really is.
 */
async function findConfined(
  pattern: string,
  root: string,
  { workspace, hiddenDirs }: Pick<ToolContext, "workspace" | "hiddenDirs">,
): Promise<string[]> {
  const workspaceReal = realpathSync(workspace);
  const found = await findFiles(pattern, {
    cwd: root,
    ignore: IGNORED,
    dot: true,
    followSymbolicLinks: false,
  });
  const kept = await Promise.all(
    found.map(async (file) => {
      const real = await realpath(join(root, file)).catch(() => undefined);
      return real !== undefined && isInside(workspaceReal, real) && !isHidden(real, hiddenDirs)
        ? file
        : undefined;
    }),
  );
  return kept.filter((file): file is string => file !== undefined).sort();
}

export const globTool = defineTool({
  ...builtin("glob"),
  description:
    "Find files by glob pattern (e.g. src/**/*.ts) under a directory of the workspace. .git and node_modules are skipped.",
  parameters: z.object({
    pattern: z.string().min(1),
    path: z.string().default("."),
    max_results: z.number().int().min(1).max(5000).default(500),
  }),
  readMore: "use a narrower pattern or path",
  async execute({ pattern, path, max_results }, context) {
    const refused = patternError("pattern", pattern);
    if (refused) return refused;
    const root = readablePath(context, path);
    if (typeof root !== "string") return root;
    const files = await findConfined(pattern, root, context);
    const shown = files.slice(0, max_results);
    const more =
      files.length > shown.length ? `\n[${files.length - shown.length} more; narrow the pattern]` : "";
    return {
      ok: true,
      output: shown.length ? shown.join("\n") + more : "(no files match)",
      summary: `${files.length} files`,
    };
  },
});

export const grepTool = defineTool({
  ...builtin("grep"),
  description:
    "Search file contents with a regular expression (JavaScript syntax). Prints path:line: text for each match, with context lines if asked.",
  parameters: z.object({
    pattern: z.string().min(1),
    path: z.string().default("."),
    glob: z.string().default("**/*").describe("Only files matching this glob, relative to path"),
    ignore_case: z.boolean().default(false),
    context: z.number().int().min(0).max(10).default(0).describe("Lines of context around each match"),
    max_matches: z.number().int().min(1).max(2000).default(100),
  }),
  readMore: "use a narrower pattern, path or glob",
  async execute(args, context) {
    const flags = args.ignore_case ? "i" : "";
    try {
      // Compiled here, where a bad one fails at once; it is run by the matcher's thread.
      RegExp(args.pattern, flags);
    } catch (error) {
      return toolError(
        `invalid regular expression: ${(error as Error).message}`,
        "fix the pattern (JavaScript regex syntax)",
      );
    }
    const refused = patternError("glob", args.glob);
    if (refused) return refused;
    const root = readablePath(context, args.path);
    if (typeof root !== "string") return root;
    const info = await stat(root).catch(() => undefined);
    if (!info) return toolError(`no such path: ${args.path}`, "check the path with list_dir");
    const files = info.isFile() ? [""] : await findConfined(args.glob, root, context);
    const matcher = new LineMatcher(args.pattern, flags);
    try {
      return await grepFiles(args, context, { root, files, matcher });
    } catch (error) {
      if (!(error instanceof PatternTooSlowError)) throw error;
      return toolError(
        `${error.message} and was stopped: it backtracks too much on these lines`,
        "simplify the pattern (no nested repeats such as (a+)+), or narrow the path or glob",
      );
    } finally {
      matcher.close();
    }
  },
});

/** The grep itself, over the files found, matching lines with `matcher`. */
async function grepFiles(
  args: GrepArgs,
  context: ToolContext,
  { root, files, matcher }: { root: string; files: string[]; matcher: LineMatcher },
): Promise<ToolResult> {
  const workspace = realpathSync(context.workspace);
  const out: string[] = [];
  let matches = 0;
  /** Matches shown per file, by its path under the search path ("" when that is the file). */
  const matchedIn = new Map<string, number>();
  let hardLinked = 0;
  let tooLarge = 0;
  let binary = 0;
  for (const file of files) {
    if (context.signal.aborted || matches >= args.max_matches) break;
    const full = file ? join(root, file) : root;
    const size = (await stat(full).catch(() => undefined))?.size ?? 0;
    if (size > MAX_GREP_FILE_BYTES) {
      tooLarge++;
      continue;
    }
    const buffer = await readConfined(workspace, full, context);
    if (isRefusal(buffer)) {
      if (buffer.refused === "hard-linked") hardLinked++;
      continue;
    }
    if (isBinary(buffer)) {
      binary++;
      continue;
    }
    const text = buffer.toString("utf8");
    const lines = text.split("\n");
    const name = file || args.path;
    let lastShown = -1;
    for (const i of await matcher.match(text, args.max_matches - matches, context.signal)) {
      matches++;
      matchedIn.set(file, (matchedIn.get(file) ?? 0) + 1);
      const from = Math.max(lastShown + 1, i - args.context);
      const to = Math.min(lines.length - 1, i + args.context);
      if (args.context > 0 && out.length > 0 && from > lastShown + 1) out.push("--");
      for (let k = from; k <= to; k++) out.push(`${name}:${k + 1}${k === i ? ":" : "-"} ${lines[k]}`);
      lastShown = to;
    }
  }
  const notes: string[] = [];
  const stopped = matches >= args.max_matches;
  if (stopped) notes.push(`[stopped at ${args.max_matches} matches; narrow the search]`);
  if (tooLarge > 0)
    notes.push(
      `[${tooLarge} file${tooLarge === 1 ? "" : "s"} over grep's cap of ${MAX_GREP_FILE_BYTES / 1024 / 1024} MiB not searched; read_file reads files of any size]`,
    );
  if (binary > 0) notes.push(binarySkippedNote(binary));
  if (hardLinked > 0)
    notes.push(
      `[${hardLinked} file${hardLinked === 1 ? "" : "s"} with other hard links not searched; set sandbox.readHardLinks: true in troupe.yaml to search them]`,
    );
  if (matches === 0) return { ok: true, output: ["(no matches)", ...notes].join("\n") };
  return {
    ok: true,
    output: [...out, ...notes].join("\n"),
    summary: `${matches} matches`,
    ...(stopped ? { nextActions: narrowerGreps(args, matchedIn) } : {}),
  };
}

interface GrepArgs {
  pattern: string;
  path: string;
  glob: string;
  ignore_case: boolean;
  context: number;
  max_matches: number;
}

/**
 * Greps that narrow one stopped at its cap, as calls to make, from where the matches shown were: the
 * directory or file under the common part of their paths that holds the most, and the file type most
 * of them are. When they are all in one file, only a more specific pattern narrows it.
 */
function narrowerGreps(args: GrepArgs, matchedIn: ReadonlyMap<string, number>): string[] {
  const call = (change: Partial<GrepArgs>) => {
    const next = { ...args, ...change };
    const shown: Record<string, unknown> = { pattern: next.pattern, path: next.path };
    if (next.glob !== "**/*") shown.glob = next.glob;
    if (next.ignore_case) shown.ignore_case = true;
    if (next.context > 0) shown.context = next.context;
    return `grep ${JSON.stringify(shown)}`;
  };
  const files = [...matchedIn.keys()];
  const actions: string[] = [];
  const byPlace = mostOf(files, matchedIn, (file) => placeUnder(commonDir(files), file));
  if (byPlace && byPlace.kinds > 1)
    actions.push(
      `${call({ path: join(args.path, byPlace.key) })} (${byPlace.count} of the ${args.max_matches} matches shown are there)`,
    );
  const byType = mostOf(files, matchedIn, (file) => extname(file));
  if (args.glob === "**/*" && byType?.key && byType.kinds > 1)
    actions.push(
      `${call({ glob: `**/*${byType.key}` })} (${byType.count} of the ${args.max_matches} matches shown are in ${byType.key} files)`,
    );
  if (actions.length === 0) {
    const where = files[0] ? join(args.path, files[0]) : args.path;
    actions.push(
      `all ${args.max_matches} matches shown are in ${where}: grep it with a more specific pattern than ${JSON.stringify(args.pattern)}, or read it with read_file`,
    );
  }
  return actions;
}

/** The key most matches share, with their count and how many keys there are. */
function mostOf(
  files: string[],
  counts: ReadonlyMap<string, number>,
  keyOf: (file: string) => string,
): { key: string; count: number; kinds: number } | undefined {
  const totals = new Map<string, number>();
  for (const file of files) totals.set(keyOf(file), (totals.get(keyOf(file)) ?? 0) + (counts.get(file) ?? 0));
  let best: { key: string; count: number } | undefined;
  for (const [key, count] of totals) if (!best || count > best.count) best = { key, count };
  return best && { ...best, kinds: totals.size };
}

/** The directory all these paths are under ("" for none). */
function commonDir(files: string[]): string {
  const dirs = files.map((file) => file.split("/").slice(0, -1));
  const first = dirs[0] ?? [];
  let depth = 0;
  while (depth < first.length && dirs.every((dir) => dir[depth] === first[depth])) depth++;
  return first.slice(0, depth).join("/");
}

/** The directory or file right under `dir` that `file` is, or is in. */
function placeUnder(dir: string, file: string): string {
  const rest = (dir ? file.slice(dir.length + 1) : file).split("/");
  return dir ? `${dir}/${rest[0]}` : (rest[0] as string);
}

export const SEARCH_TOOLS: Tool[] = [globTool as Tool, grepTool as Tool];
