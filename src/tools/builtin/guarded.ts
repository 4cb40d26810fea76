import { realpathSync } from "node:fs";
import type { FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { isRefusal, openConfined, type ReadRefusal, readConfined } from "../../safety/confined-read.js";
import { PathChangedError, removeFile, replaceFile } from "../../safety/replace-file.js";
import {
  PathOutsideWorkspaceError,
  resolveForWrite,
  resolveInWorkspace,
} from "../../safety/workspace-guard.js";
import { isSkillPath, parseSkillPath, stillThere } from "../../skills/skill-files.js";
import { type ToolContext, type ToolResult, toolError } from "../tool.js";

/** The real path to read, or the error result the model gets. */
export function readablePath(context: ToolContext, path: string): string | ToolResult {
  return guard(() => resolveInWorkspace(context.workspace, path, context));
}

/** The real path to write, or the error result the model gets. */
export function writablePath(context: ToolContext, path: string): string | ToolResult {
  // read_file reads `skill:NAME/PATH` from the skill; a write there would make a workspace file of
  // that name which no read could reach.
  if (isSkillPath(path))
    return toolError(
      `"${path}" is a skill's file, which tools may read but not change`,
      "use a path inside the workspace that tools may change",
    );
  return guard(() =>
    resolveForWrite(context.workspace, path, {
      protectedDirs: context.protectedDirs ?? [],
      hiddenDirs: context.hiddenDirs,
    }),
  );
}

/**
 * Opens a skill's own file, `skill:NAME/PATH`, for reading: only a skill this agent may load
 * (`context.skillDirs`, real paths from when the skills were found), and only a file inside that
 * skill's directory, judged where it is opened
 * (its real path, no symbolic link out, the descriptor checked again) as workspace reads are. Outside
 * the workspace guard's scope, and read-only: no tool writes here.
 */
export async function openSkillFile(
  context: Pick<ToolContext, "skillDirs" | "readHardLinks" | "hiddenDirs">,
  path: string,
): Promise<FileHandle | ToolResult> {
  const parsed = parseSkillPath(path);
  if ("problem" in parsed)
    return toolError(parsed.problem, "use a path exactly as the loaded skill lists it");
  const dir = context.skillDirs?.get(parsed.name);
  if (!dir) {
    const names = [...(context.skillDirs?.keys() ?? [])];
    return toolError(
      `no skill "${parsed.name}" with files that this agent may load`,
      `read the files of one of: ${names.join(", ") || "(none)"}`,
    );
  }
  // Judged against where the skill was found, never where its path leads now.
  if (!stillThere(dir)) return toolError(`the skill "${parsed.name}" is gone`, "do without it");
  const handle = await openConfined(dir, join(dir, parsed.relative), {
    readHardLinks: context.readHardLinks,
    hiddenDirs: context.hiddenDirs,
  });
  if (!isRefusal(handle)) return handle;
  if (handle.refused === "outside")
    return toolError(
      `"${path}" leads outside the skill's directory`,
      "read only the files the loaded skill lists",
    );
  return refusalError(handle, path);
}

/** The file at `real` opened for reading, checked where it is opened; or the error result. */
export async function openForRead(
  context: Pick<ToolContext, "workspace" | "readHardLinks" | "hiddenDirs">,
  real: string,
  path: string,
): Promise<FileHandle | ToolResult> {
  const handle = await openConfined(realpathSync(context.workspace), real, context);
  return isRefusal(handle) ? refusalError(handle, path) : handle;
}

/** The text of the file at `real`, undefined when there is none; or the error result. */
export async function readText(
  context: Pick<ToolContext, "workspace" | "readHardLinks" | "hiddenDirs">,
  real: string,
  path: string,
): Promise<string | undefined | ToolResult> {
  const bytes = await readConfined(realpathSync(context.workspace), real, context);
  if (!isRefusal(bytes)) return bytes.toString("utf8");
  return bytes.refused === "missing" ? undefined : refusalError(bytes, path);
}

/** Replaces the file at `real` with `content`; an error result when the path changed meanwhile. */
export async function writeText(
  real: string,
  path: string,
  content: string,
): Promise<ToolResult | undefined> {
  return changed(path, () => replaceFile(real, content));
}

/** Removes the file at `real`; an error result when the path changed meanwhile. */
export async function removeText(real: string, path: string): Promise<ToolResult | undefined> {
  return changed(path, () => removeFile(real));
}

export function refusalError(refusal: ReadRefusal, path: string): ToolResult {
  switch (refusal.refused) {
    case "missing":
      return toolError(`no such file: ${path}`, "list the directory to find the right name");
    case "outside":
      return toolError(`"${path}" is outside the workspace`, "use a path inside the workspace");
    case "hidden":
      return toolError(
        `"${path}" is in troupe's data directory (credentials, keys, runs), which tools may not read`,
        "read files of the project instead",
      );
    case "directory":
      return toolError(`${path} is a directory`, "use list_dir for directories");
    case "not-a-file":
      return toolError(`${path} is not a regular file`, "read regular files only");
    case "hard-linked":
      return toolError(
        `${path} has ${refusal.links} hard links, and the others may be outside the workspace, so it is not read`,
        "read another file, or ask the user to allow it: set sandbox.readHardLinks: true in troupe.yaml",
      );
  }
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

async function changed(path: string, act: () => Promise<void>): Promise<ToolResult | undefined> {
  try {
    await act();
    return undefined;
  } catch (error) {
    if (error instanceof PathChangedError)
      return toolError(
        `${path} changed while it was being written (${error.message}); nothing was written`,
        "check the path with list_dir, then try again",
      );
    throw error;
  }
}
