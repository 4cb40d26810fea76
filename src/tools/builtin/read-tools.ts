import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { isHidden, workspaceRelative } from "../../safety/workspace-guard.js";
import { defineTool, toolError } from "../tool.js";
import { openForRead, readablePath } from "./guarded.js";

const MAX_READ_BYTES = 256 * 1024;
const DEFAULT_LIMIT = 400;

export const readFileTool = defineTool({
  name: "read_file",
  description: "Read a text file in the workspace. Lines come numbered; use offset and limit for long files.",
  effect: "read",
  parameters: z.object({
    path: z.string().describe("Path relative to the workspace root"),
    offset: z.number().int().min(1).optional().describe("First line to read, 1-based"),
    limit: z.number().int().min(1).max(2000).optional().describe(`Lines to read (default ${DEFAULT_LIMIT})`),
  }),
  readMore: "read on with a larger offset",
  async execute({ path, offset = 1, limit = DEFAULT_LIMIT }, context) {
    const real = readablePath(context, path);
    if (typeof real !== "string") return real;
    const handle = await openForRead(context, real, path);
    if (!("fd" in handle)) return handle;
    let bytes: Buffer;
    let info: { size: number };
    try {
      info = await handle.stat();
      const buffer = Buffer.alloc(Math.min(info.size, MAX_READ_BYTES));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      bytes = buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
    if (bytes.includes(0)) return toolError(`${path} is a binary file`, "read text files only");
    const text = bytes.toString("utf8");
    const lines = text.split("\n");
    if (lines.at(-1) === "") lines.pop();
    const slice = lines.slice(offset - 1, offset - 1 + limit);
    const width = String(offset + slice.length).length;
    const numbered = slice.map((line, i) => `${String(offset + i).padStart(width)}\t${line}`).join("\n");
    const notes: string[] = [];
    if (offset - 1 + slice.length < lines.length || info.size > MAX_READ_BYTES) {
      notes.push(
        `[showing lines ${offset}-${offset + slice.length - 1} of ${info.size > MAX_READ_BYTES ? "more than " : ""}${lines.length}; read on with offset=${offset + slice.length}]`,
      );
    }
    if (info.size <= MAX_READ_BYTES && text.length > 0 && !text.endsWith("\n"))
      notes.push("[no newline at end of file]");
    return { ok: true, output: [numbered, ...notes].filter(Boolean).join("\n") };
  },
});

export const listDirTool = defineTool({
  name: "list_dir",
  description: "List a directory in the workspace: one entry per line, directories end with /.",
  effect: "read",
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
