import type { Tool } from "../tool.js";
import { listDirTool, readFileTool } from "./read-tools.js";
import { SEARCH_TOOLS } from "./search-tools.js";
import { type ShellToolOptions, shellTool } from "./shell.js";
import { WRITE_TOOLS } from "./write-tools.js";

/** Every built-in tool; the names and effects agree with `BUILTIN_TOOL_EFFECTS` (a test checks). */
export function builtinTools(options: { shell?: ShellToolOptions } = {}): Tool[] {
  return [
    readFileTool as Tool,
    listDirTool as Tool,
    ...SEARCH_TOOLS,
    ...WRITE_TOOLS,
    shellTool(options.shell),
  ];
}
