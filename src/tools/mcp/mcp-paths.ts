import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  PathOutsideWorkspaceError,
  resolveForWrite,
  resolveInWorkspace,
} from "../../safety/workspace-guard.js";
import { type ToolResult, toolError } from "../tool.js";

/** Argument names that say they hold paths: any string under them is one. */
const PATH_KEY = /path|file|dir|directory|folder|source|destination|root/i;

/** A string in the arguments that names a place on this machine. */
export interface PathArgument {
  /** Where it is in the arguments: `path`, `opts.path`, `paths[2]`. */
  where: string;
  value: string;
  /** The filesystem path it names (relative ones to the workspace); undefined when it cannot be read as one. */
  path: string | undefined;
}

/**
 * Every string at any depth of the arguments that names a place: under a path-like key, or one that
 * reads as a path wherever it is (`~`, `~/…`, a `file:` URI, `./…`, `../…`, `…/../…`, or an absolute
 * path whose first directory exists here, so `/etc/passwd` is one and `/api/v1` is not). A server may
 * expand `~` or take a URI where its schema says "text": the check goes by what a value is, not only
 * by what its key is called.
 */
export function pathArguments(args: unknown): PathArgument[] {
  const found: PathArgument[] = [];
  const visit = (value: unknown, where: string, underPathKey: boolean) => {
    if (typeof value === "string") {
      if (underPathKey || readsAsPath(value)) found.push({ where, value, path: pathOf(value) });
    } else if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) visit(item, `${where}[${i}]`, underPathKey);
    } else if (value !== null && typeof value === "object") {
      for (const [key, item] of Object.entries(value))
        visit(item, where ? `${where}.${key}` : key, PATH_KEY.test(key));
    }
  };
  visit(args, "", false);
  return found;
}

/**
 * The error result for the first path argument outside the workspace, or, for a tool that may change
 * things, inside a place tools may not change (`.git`, `.troupe`, the config dir); else undefined.
 */
export function pathArgumentError(
  args: unknown,
  workspace: string,
  options: { readOnly: boolean; protectedDirs?: string[] | undefined; hiddenDirs?: string[] | undefined },
): ToolResult | undefined {
  for (const { where, value, path } of pathArguments(args)) {
    if (path === undefined)
      return toolError(
        `${where}: "${value}" is not a file URI this machine can read`,
        "use a path inside the workspace",
      );
    try {
      if (options.readOnly) resolveInWorkspace(workspace, path, options);
      else resolveForWrite(workspace, path, { ...options, protectedDirs: options.protectedDirs ?? [] });
    } catch (error) {
      if (error instanceof PathOutsideWorkspaceError)
        return toolError(
          `${where}: ${error.message}`,
          options.readOnly
            ? "use a path inside the workspace"
            : "use a path inside the workspace that tools may change",
        );
      throw error;
    }
  }
  return undefined;
}

function readsAsPath(value: string): boolean {
  if (value === "~" || value.startsWith("~/") || /^file:/i.test(value)) return true;
  if (value.startsWith("./") || value.startsWith("../") || value.includes("/../") || value === "..")
    return true;
  if (!value.startsWith("/")) return false;
  const first = value.slice(1).split("/")[0];
  return first !== undefined && first !== "" && existsSync(`/${first}`);
}

function pathOf(value: string): string | undefined {
  if (value === "~") return homedir();
  if (value.startsWith("~/")) return join(homedir(), value.slice(2));
  if (/^file:/i.test(value)) {
    try {
      return fileURLToPath(value);
    } catch {
      return undefined;
    }
  }
  return value;
}
