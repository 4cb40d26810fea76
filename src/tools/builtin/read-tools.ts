import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { builtin } from "../../config/tool-catalog.js";
import { isHidden, workspaceRelative } from "../../safety/workspace-guard.js";

import { isSkillPath } from "../../skills/skill-files.js";
import { defineTool, toolError } from "../tool.js";
import { binaryFileError, NO_NEWLINE_NOTE } from "./file-notes.js";
import { openForRead, openSkillFile, readablePath } from "./guarded.js";
import { type Line, type LineIndex, lineIndexOf, MAX_LINE_BYTES, readLines } from "./line-index.js";

const DEFAULT_LIMIT = 400;

export const readFileTool = defineTool({
  ...builtin("read_file"),
  description: `Read a text file in the workspace, of any size. Lines come numbered; use offset and limit for long files. A line longer than ${MAX_LINE_BYTES} bytes is cut.`,
  parameters: z.object({
    path: z
      .string()
      .describe("Path relative to the workspace root, or skill:NAME/PATH for a file a loaded skill lists"),
    offset: z.number().int().min(1).optional().describe("First line to read, 1-based"),
    limit: z.number().int().min(1).max(2000).optional().describe(`Lines to read (default ${DEFAULT_LIMIT})`),
  }),
  readMore: "read on with a larger offset",
  async execute({ path, offset = 1, limit = DEFAULT_LIMIT }, context) {
    // A skill's file is confined to its skill's directory; anything else to the workspace.
    const skill = isSkillPath(path);
    const real = skill ? path : readablePath(context, path);
    if (typeof real !== "string") return real;
    const handle = skill ? await openSkillFile(context, path) : await openForRead(context, real, path);
    if (!("fd" in handle)) return handle;
    try {
      // Everything is read through the descriptor the guard checked; the path is never opened again.
      const index = await lineIndexOf(handle, real, context.signal);
      if (index.binary) return toolError(binaryFileError(path), "read text files only");
      if (index.lines === 0 && offset === 1) return { ok: true, output: "(empty file)" };
      if (offset > index.lines)
        return toolError(
          `offset ${offset} is past the end of ${path}, which has ${index.lines} line${index.lines === 1 ? "" : "s"}`,
          index.lines === 0 ? "the file is empty" : `read with an offset from 1 to ${index.lines}`,
        );
      const lines = await readLines(handle, index, offset, limit, context.signal);
      return { ok: true, output: numbered(lines, offset, index) };
    } finally {
      await handle.close();
    }
  },
});

/** The lines numbered from `offset`, with the notes on what is not shown. */
function numbered(lines: Line[], offset: number, index: LineIndex): string {
  const lastShown = offset + lines.length - 1;
  const width = String(lastShown).length;
  const out = lines.map(({ text, bytes }, i) => {
    const cut = bytes > MAX_LINE_BYTES ? ` [… line cut: ${MAX_LINE_BYTES} of its ${bytes} bytes shown]` : "";
    return `${String(offset + i).padStart(width)}\t${text}${cut}`;
  });
  if (lastShown < index.lines)
    out.push(
      `[showing lines ${offset}-${lastShown} of ${index.lines}; read on with offset=${lastShown + 1}]`,
    );
  else if (!index.endsWithNewline) out.push(NO_NEWLINE_NOTE);
  return out.join("\n");
}

export const listDirTool = defineTool({
  ...builtin("list_dir"),
  description: "List a directory in the workspace: one entry per line, directories end with /.",
  parameters: z.object({
    path: z.string().default(".").describe("Directory relative to the workspace root"),
  }),
  async execute({ path }, context) {
    const { workspace } = context;
    const real = readablePath(context, path);
    if (typeof real !== "string") return real;
    const entries = await readdir(real, { withFileTypes: true }).catch(() => undefined);
    if (!entries)
      return toolError(`no such directory: ${path}`, "list the parent directory to find the right name");
    const names = entries
      .filter((e) => e.name !== ".git" && !isHidden(join(real, e.name), context.hiddenDirs))
      .map((e) => (e.isDirectory() ? `${e.name}/` : e.name))
      .sort();
    const where = workspaceRelative(workspace, real);
    return {
      ok: true,
      output: names.length ? names.join("\n") : "(empty)",
      summary: `${where}: ${names.length} entries`,
    };
  },
});
