import type { Tool } from "../tool.js";
import { listDirTool, readFileTool } from "./read-tools.js";
import { SEARCH_TOOLS } from "./search-tools.js";
import { type ShellToolOptions, shellTool } from "./shell.js";
import { WRITE_TOOLS } from "./write-tools.js";

/**
 * Every built-in tool but load_skill (made per agent, with its skills); each takes its name and effect
 * from `BUILTIN_TOOL_EFFECTS`.
 */
export function builtinTools(options: { shell?: ShellToolOptions } = {}): Tool[] {
  return [
    readFileTool as Tool,
    listDirTool as Tool,
    ...SEARCH_TOOLS,
    ...WRITE_TOOLS,
    shellTool(options.shell),
  ];
}
