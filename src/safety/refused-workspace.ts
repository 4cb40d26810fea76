import { lstatSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, sep } from "node:path";
import { isInside, realPathOrUndefined } from "../util/paths.js";
import { isProtectedName } from "./protected-paths.js";

/** Troupe's own directories a workspace may not be in: the data dir and the config dirs it loads. */
export interface TroupeDirs {
  /** The data dir (credentials, keys, the event store). */
  data: readonly string[];
  /** The config dir, and the agents and skills dirs it names. */
  config: readonly string[];
}

/** The user's, from the environment Troupe runs in: where their programs find settings and commands. */
export interface UserDirs {
  home: string | undefined;
  /** `$XDG_CONFIG_HOME`, when set. */
  configHome?: string | undefined;
  /** `$PATH`, as it is. */
  path?: string | undefined;
}

/**
 * Why `workspace` (a real path) cannot be a workspace, in words that end a one-line refusal, or
 * undefined when it can. An agent writes its workspace without asking under auto-edit, and the
 * sandbox keeps every `.git` in a workspace read-only, never the workspace itself: so a workspace
 * inside a `.git` or `.troupe`, inside a directory git takes for a git dir (a bare repository, a
 * `--separate-git-dir`), or inside Troupe's data or config dir would let it write what git or Troupe
 * runs later outside the sandbox (`core.fsmonitor`, hooks, an agent set to yolo). A workspace that
 * holds such a directory is served: those are kept read-only or hidden inside it.
 */
export function workspaceRefusal(
  workspace: string,
  dirs: TroupeDirs,
  user: UserDirs = { home: undefined },
): string | undefined {
  const segments = workspace.split(sep);
  const named = segments.findIndex(isProtectedName);
  if (named >= 0) {
    const dir = segments.slice(0, named + 1).join(sep);
    return `is inside ${dir}, which git or Troupe runs code from: name the project's own directory`;
  }
  for (let dir = workspace; ; dir = dirname(dir)) {
    if (looksLikeGitDir(dir))
      return `is inside ${dir}, a git directory (it holds HEAD, objects/ and refs/), which git runs code from: name the project's own directory`;
    if (dirname(dir) === dir) break;
  }
  const within = (list: readonly string[]) =>
    list.map((dir) => realPathOrUndefined(dir) ?? dir).find((dir) => isInside(dir, workspace));
  const data = within(dirs.data);
  if (data) return `is inside troupe's data directory ${data}: name the project's own directory`;
  const config = within(dirs.config);
  if (config)
    return `is inside the config directory ${config}, which troupe loads at start: name the project's own directory`;
  return homeRefusal(workspace, user);
}

/**
 * A workspace in the home directory whose files the user's programs load or run, whoever wrote them:
 * `~/.config` or `~/.local` themselves (git's global config, systemd and autostart units are in
 * them; one program's own dir inside, like `~/.config/nvim`, is a project), and anything inside
 * `~/.ssh`, `~/.gnupg` or a directory on PATH (a file written there runs when its name is typed).
 * (A workspace holding the home directory is refused by the sandbox's plan.)
 */
function homeRefusal(workspace: string, user: UserDirs): string | undefined {
  const home = user.home && isAbsolute(user.home) ? (realPathOrUndefined(user.home) ?? user.home) : undefined;
  if (!home) return undefined;
  const real = (dir: string) => realPathOrUndefined(dir) ?? dir;
  const settings = [join(home, ".config"), join(home, ".local")];
  if (user.configHome && isAbsolute(user.configHome)) settings.push(user.configHome);
  const setting = settings.map(real).find((dir) => isInside(workspace, dir));
  if (setting)
    return `is ${setting}, where git, your shell and other programs read their settings: name the one directory you mean (as ${join(setting, "nvim")}) or a project's`;
  const keys = [join(home, ".ssh"), join(home, ".gnupg")].map(real).find((dir) => isInside(dir, workspace));
  if (keys) return `is inside ${keys}, whose keys and settings ssh or gpg act on: name a project's directory`;
  // Only PATH's directories in the home directory: a relative entry, or one holding home, is no place.
  const onPath = (user.path ?? "")
    .split(":")
    .filter((dir) => isAbsolute(dir))
    .map(real)
    .find((dir) => dir !== home && isInside(home, dir) && isInside(dir, workspace));
  if (onPath)
    return `is inside ${onPath}, a directory on PATH: a file written there runs when its name is typed; name a project's directory`;
  return undefined;
}

/**
 * What git checks before it takes a directory for a git dir: a HEAD, and objects/ and refs/, or a
 * `commondir` file naming where they are (a linked worktree's git dir).
 */
function looksLikeGitDir(dir: string): boolean {
  const is = (name: string, directory: boolean) => {
    try {
      const info = name === "HEAD" ? lstatSync(join(dir, "HEAD")) : statSync(join(dir, name));
      return directory ? info.isDirectory() : !info.isDirectory();
    } catch {
      return false;
    }
  };
  return is("HEAD", false) && ((is("objects", true) && is("refs", true)) || is("commondir", false));
}
