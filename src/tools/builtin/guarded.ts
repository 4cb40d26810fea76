import {
  PathOutsideWorkspaceError,
  resolveForWrite,
  resolveInWorkspace,
} from "../../safety/workspace-guard.js";
import { type ToolContext, type ToolResult, toolError } from "../tool.js";

/** The real path to read, or the error result the model gets. */
export function readablePath(context: ToolContext, path: string): string | ToolResult {
  return guard(() => resolveInWorkspace(context.workspace, path));
}

/** The real path to write, or the error result the model gets. */
export function writablePath(context: ToolContext, path: string): string | ToolResult {
  return guard(() =>
    resolveForWrite(context.workspace, path, { protectedDirs: context.protectedDirs ?? [] }),
  );
}

function guard(resolvePath: () => string): string | ToolResult {
  try {
    return resolvePath();
  } catch (error) {
    if (error instanceof PathOutsideWorkspaceError)
      return toolError(error.message, "use a path inside the workspace that tools may change");
    throw error;
  }
}
