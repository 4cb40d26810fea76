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

/**
 * The words of an argument's name that say it holds paths: any string under such a key is one. A
 * name is read as words (`sourcePath`, `source_dir`, `file-name`: camelCase, snake and kebab split),
 * so `resourceType` or `profile`, which only hold the letters of one, are not.
 */
const PATH_WORDS = new Set(
  [
    "path pathname filepath dirpath file filename outfile infile dir dirname srcdir rootdir workdir outdir",
    "directory directories folder source src destination dest dst root cwd",
  ]
    .join(" ")
    .split(" ")
    .flatMap((word) => (word.endsWith("s") ? [word] : [word, `${word}s`])),
);

/** Whether an argument's name says it holds paths: one of its words is a path word. */
export function isPathKey(key: string): boolean {
  return key
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .some((word) => PATH_WORDS.has(word));
}

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
 * reads as a path wherever it is (`~`, `~/…`, `~user/…`, a `file:` URI, `./…`, `../…`, `…/../…`, or an absolute
 * path whose first directory exists here, so `/etc/passwd` is one and `/api/v1` is not). A server may
 * expand `~` or take a URI where its schema says "text": the check goes by what a value is, not only
 * by what its key is called.
 */
export function pathArguments(args: unknown): PathArgument[] {
  const found: PathArgument[] = [];
  mapPaths(args, "", false, (value, where) => {
    found.push({ where, value, path: pathOf(value) });
    return value;
  });
  return found;
}

/** The arguments as the server gets them, or the error result for the first path that may not be used. */
export type CheckedArguments = { args: Record<string, unknown> } | { refused: ToolResult };

/**
 * Holds every path argument to the workspace (and, for a tool that may change things, out of `.git`,
 * `.troupe` and the config dir) and sends each as Troupe resolved it: the real path, absolute. A
 * server would resolve a relative path against its own root (server-filesystem: its first allowed
 * directory), which need not be the workspace; a `file:` URI is absolute already and goes as it is.
 */
export function checkPathArguments(
  args: Record<string, unknown>,
  workspace: string,
  options: { readOnly: boolean; protectedDirs?: string[] | undefined; hiddenDirs?: string[] | undefined },
): CheckedArguments {
  const refusal = (message: string): never => {
    throw new Refusal(
      toolError(
        message,
        options.readOnly
          ? "use a path inside the workspace"
          : "use a path inside the workspace that tools may change",
      ),
    );
  };
  try {
    const checked = mapPaths(args, "", false, (value, where) => {
      const path = pathOf(value);
      if (path === undefined)
        refusal(
          `${where}: "${value}" is not a path Troupe can hold to the workspace (another user's ~, or a file URI this machine cannot read)`,
        );
      let real: string;
      try {
        real = options.readOnly
          ? resolveInWorkspace(workspace, path as string, options)
          : resolveForWrite(workspace, path as string, {
              ...options,
              protectedDirs: options.protectedDirs ?? [],
            });
      } catch (error) {
        if (error instanceof PathOutsideWorkspaceError) return refusal(`${where}: ${error.message}`);
        throw error;
      }
      if (/^file:/i.test(value)) return value;
      // A URL (`https://…`) under a path-like key is the server's to read, not a file: it goes as it is,
      // and may not climb (`x://../…` is `../…` to a server that takes it as a path).
      if (URL_LIKE.test(value))
        return value.split(/[/\\]/).includes("..")
          ? refusal(`${where}: "${value}" climbs out with ".."`)
          : value;
      return real;
    });
    return { args: checked as Record<string, unknown> };
  } catch (error) {
    if (error instanceof Refusal) return { refused: error.result };
    throw error;
  }
}

/** A value that starts with a URL scheme and `//`. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i;

/** The first path argument that may not be used, as its error result: thrown out of the walk. */
class Refusal {
  constructor(readonly result: ToolResult) {}
}

/** The arguments with each path string (by key or by value) replaced by what `replace` makes of it. */
function mapPaths(
  value: unknown,
  where: string,
  underPathKey: boolean,
  replace: (value: string, where: string) => string,
): unknown {
  if (typeof value === "string") return underPathKey || readsAsPath(value) ? replace(value, where) : value;
  if (Array.isArray(value))
    return value.map((item, i) => mapPaths(item, `${where}[${i}]`, underPathKey, replace));
  if (value !== null && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [
        key,
        mapPaths(item, where ? `${where}.${key}` : key, isPathKey(key), replace),
      ]),
    );
  return value;
}

function readsAsPath(value: string): boolean {
  // `~user/…` too: a server may expand it (Python's expanduser does), though Troupe does not.
  if (/^~[^\s/]*(?:\/|$)/.test(value) || /^file:/i.test(value)) return true;
  if (value.startsWith("./") || value.startsWith("../") || value.includes("/../") || value === "..")
    return true;
  if (!value.startsWith("/")) return false;
  const first = value.slice(1).split("/")[0];
  return first !== undefined && first !== "" && existsSync(`/${first}`);
}

function pathOf(value: string): string | undefined {
  if (value === "~") return homedir();
  if (value.startsWith("~/")) return join(homedir(), value.slice(2));
  // Another user's home (`~root/…`): a server might expand it; Troupe will not guess where.
  if (/^~[^\s/]*(?:\/|$)/.test(value)) return undefined;
  if (/^file:/i.test(value)) {
    try {
      return fileURLToPath(value);
    } catch {
      return undefined;
    }
  }
  return value;
}
