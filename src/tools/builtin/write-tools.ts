import { existsSync } from "node:fs";
import { applyPatch, createTwoFilesPatch, parsePatch, type StructuredPatch } from "diff";
import { z } from "zod";
import { builtin } from "../../config/tool-catalog.js";
import { workspaceRelative } from "../../safety/workspace-guard.js";
import {
  type CallPreview,
  defineTool,
  type Tool,
  type ToolContext,
  type ToolResult,
  toolError,
} from "../tool.js";
import { readText, removeText, writablePath, writeText } from "./guarded.js";

/** The file's text for a preview: undefined when there is none, a note when it may not be read. */
async function previewText(
  context: Pick<ToolContext, "workspace">,
  real: string,
  path: string,
): Promise<string | undefined> {
  const text = await readText(context, real, path);
  return typeof text === "object" ? `(its text is not shown: ${text.error})\n` : text;
}

/**
 * The change as a unified diff, as git shows one: without the line of `=` the diff library starts
 * with and the tab it ends each file line with (the first line of every preview and of `troupe
 * approvals`' WHAT column was that line). A write of the text already there says so.
 */
function diffOf(path: string, before: string | undefined, after: string): string {
  if (before === after) return `no change: ${path} already holds this text\n`;
  const patch = createTwoFilesPatch(
    before === undefined ? "/dev/null" : `a/${path}`,
    `b/${path}`,
    before ?? "",
    after,
    "",
    "",
    { context: 3 },
  );
  return patch.replace(/^=+\n/, "").replace(/^(---|\+\+\+) (.*)\t$/gm, "$1 $2");
}

export const writeFileTool = defineTool({
  ...builtin("write_file"),
  // The whole content to one path: run again, it leaves the file as once.
  idempotent: true,
  description:
    "Create or overwrite a file in the workspace with the given content. Parent directories are created.",
  parameters: z.object({ path: z.string(), content: z.string() }),
  async preview({ path, content }, context) {
    const real = writablePath(context as ToolContext, path);
    if (typeof real !== "string") return { detail: real.error ?? "", paths: [path] };
    return {
      detail: diffOf(path, await previewText(context, real, path), content),
      paths: [workspaceRelative(context.workspace, real)],
    };
  },
  async execute({ path, content }, context) {
    const real = writablePath(context, path);
    if (typeof real !== "string") return real;
    const existed = existsSync(real);
    const failed = await writeText(real, path, content);
    if (failed) return failed;
    return {
      ok: true,
      output: `${existed ? "overwrote" : "created"} ${path} (${Buffer.byteLength(content)} bytes)`,
      artifacts: [workspaceRelative(context.workspace, real)],
    };
  },
});

export const editFileTool = defineTool({
  ...builtin("edit_file"),
  description:
    "Replace old_string with new_string in a file. old_string must match the file exactly (whitespace included) and only once, unless replace_all is true. Read the file first.",
  parameters: z.object({
    path: z.string(),
    old_string: z.string().min(1),
    new_string: z.string(),
    replace_all: z.boolean().optional(),
  }),
  async preview(args, context) {
    const real = writablePath(context as ToolContext, args.path);
    if (typeof real !== "string") return { detail: real.error ?? "", paths: [args.path] };
    const before = await previewText(context, real, args.path);
    const after = before === undefined ? undefined : replace(before, args);
    return {
      detail:
        typeof after === "string" ? diffOf(args.path, before, after) : `edit ${args.path} (does not apply)`,
      // The file that changes: where a link leads, not the link's name.
      paths: [workspaceRelative(context.workspace, real)],
    };
  },
  async execute(args, context) {
    const real = writablePath(context, args.path);
    if (typeof real !== "string") return real;
    const before = await readText(context, real, args.path);
    if (typeof before === "object") return before;
    if (before === undefined)
      return toolError(
        `no such file: ${args.path}`,
        "create it with write_file, or check the path with list_dir",
      );
    const after = replace(before, args);
    if (typeof after !== "string") return after;
    const failed = await writeText(real, args.path, after);
    if (failed) return failed;
    const count = args.replace_all ? before.split(args.old_string).length - 1 : 1;
    return {
      ok: true,
      output: `edited ${args.path}: ${count} replacement${count === 1 ? "" : "s"}`,
      artifacts: [workspaceRelative(context.workspace, real)],
    };
  },
});

function replace(
  text: string,
  args: { path: string; old_string: string; new_string: string; replace_all?: boolean | undefined },
): string | ToolResult {
  const count = text.split(args.old_string).length - 1;
  if (count === 0) {
    return {
      ...toolError(
        `old_string was not found in ${args.path}`,
        "re-read the file with read_file and copy the text exactly, whitespace included",
      ),
      output: closestLines(text, args.old_string),
    };
  }
  if (count > 1 && !args.replace_all) {
    return toolError(
      `old_string appears ${count} times in ${args.path}`,
      "add surrounding lines to old_string so it matches once, or set replace_all",
    );
  }
  return args.replace_all
    ? text.split(args.old_string).join(args.new_string)
    : text.replace(args.old_string, () => args.new_string);
}

/** The lines of the file most like the first line of what was looked for, numbered, with a little context. */
function closestLines(text: string, wanted: string): string {
  const lines = text.split("\n");
  const target = (wanted.split("\n").find((line) => line.trim()) ?? "").trim();
  let best = 0;
  let bestScore = -1;
  lines.forEach((line, i) => {
    const score = similarity(line.trim(), target);
    if (score > bestScore) {
      best = i;
      bestScore = score;
    }
  });
  const from = Math.max(0, best - 2);
  const shown = lines.slice(from, best + 3).map((line, i) => `${from + i + 1}\t${line}`);
  return `closest lines in the file:\n${shown.join("\n")}`;
}

/** Shared character bigrams, as a share of both: cheap and good enough to point at a near miss. */
function similarity(a: string, b: string): number {
  if (!a || !b) return 0;
  const grams = (s: string) => {
    const out = new Map<string, number>();
    for (let i = 0; i < s.length - 1; i++) out.set(s.slice(i, i + 2), (out.get(s.slice(i, i + 2)) ?? 0) + 1);
    return out;
  };
  const ga = grams(a);
  const gb = grams(b);
  let shared = 0;
  for (const [gram, n] of ga) shared += Math.min(n, gb.get(gram) ?? 0);
  return (2 * shared) / Math.max(1, a.length - 1 + b.length - 1);
}

const stripPrefix = (name: string | undefined) => (name ?? "").replace(/^[ab]\//, "");

export const applyPatchTool = defineTool({
  ...builtin("apply_patch"),
  description:
    "Apply a unified diff (as `diff -u` or `git diff` prints it) to files in the workspace. All hunks must apply or nothing is changed. Set dry_run to check it without writing.",
  parameters: z.object({ patch: z.string().min(1), dry_run: z.boolean().optional() }),
  preview({ patch }, context) {
    const files = safeParse(patch);
    // The files that change: where a link leads, not the link's name.
    const paths = (Array.isArray(files) ? files.map(targetOf) : []).map((path) => {
      const real = writablePath(context as ToolContext, path);
      return typeof real === "string" ? workspaceRelative(context.workspace, real) : path;
    });
    return { detail: patch, paths: [...new Set(paths)] } satisfies CallPreview;
  },
  async execute({ patch, dry_run }, context) {
    const files = safeParse(patch);
    if (!Array.isArray(files)) return files;
    const planned: Array<{ path: string; real: string; after: string | null }> = [];
    // What each file holds after the sections before this one: two sections of one file both apply.
    const current = new Map<string, string | null>();
    for (const file of files) {
      const path = targetOf(file);
      const real = writablePath(context, path);
      if (typeof real !== "string") return real;
      const text = current.has(real) ? current.get(real) : await readText(context, real, path);
      if (typeof text === "object" && text !== null) return text;
      const before = text ?? "";
      if (file.newFileName === "/dev/null") {
        planned.push({ path, real, after: null });
        current.set(real, null);
        continue;
      }
      const after = applyPatch(before, file, { fuzzFactor: 0 });
      if (after === false) {
        return toolError(
          `the patch does not apply to ${path}`,
          "re-read the file and make the hunk's context lines match it exactly",
        );
      }
      planned.push({ path, real, after });
      current.set(real, after);
    }
    if (!dry_run) {
      // Each file written once, as the last of its sections left it.
      const last = new Map(planned.map((entry) => [entry.real, entry]));
      for (const { path, real, after } of last.values()) {
        const failed = after === null ? await removeText(real, path) : await writeText(real, path, after);
        if (failed) return failed;
      }
    }
    const lines = planned.map(({ path, after }) => `${after === null ? "deleted" : "patched"} ${path}`);
    const output = `${dry_run ? "dry run, nothing written: " : ""}${lines.join("; ")}`;
    if (dry_run) return { ok: true, output };
    const changed = [...new Set(planned.map(({ real }) => workspaceRelative(context.workspace, real)))];
    return { ok: true, output, artifacts: changed };
  },
});

function targetOf(file: StructuredPatch): string {
  return stripPrefix(file.newFileName === "/dev/null" ? file.oldFileName : file.newFileName);
}

function safeParse(patch: string): StructuredPatch[] | ToolResult {
  try {
    const files = parsePatch(patch).filter(
      (file) => file.hunks.length > 0 || file.newFileName === "/dev/null",
    );
    if (files.length === 0)
      return toolError("the patch holds no hunks", "pass a unified diff with ---/+++ headers and @@ hunks");
    return files;
  } catch (error) {
    return toolError(
      `the patch cannot be read: ${(error as Error).message}`,
      "pass a unified diff with ---/+++ headers and @@ hunks",
    );
  }
}

export const WRITE_TOOLS: Tool[] = [writeFileTool as Tool, editFileTool as Tool, applyPatchTool as Tool];
