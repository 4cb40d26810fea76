/**
 * Whether the words of a command name a path outside the workspace, by their text alone: where cd may
 * go, what brace expansion makes, and which paths climb out.
 */

import { resolve } from "node:path";

import { HARMLESS_DEVICES } from "./command-lists.js";

/**
 * cd may only go to a literal directory inside the workspace. Then a relative path that never climbs
 * above where it starts (see leavesWorkspace) stays inside whichever such directory it is read from.
 */
export function cdProblem(args: Array<string | null>, workspace: string | undefined): string | undefined {
  const targets = args.filter((a) => a === null || a === "-" || !a.startsWith("-"));
  if (targets.length === 0) return "cd without a directory goes home, outside the workspace";
  for (const target of targets) {
    if (target === null) return "it changes to a directory computed at run time";
    if (target === "-") return "cd - goes back to the previous directory, which may be outside the workspace";
    const outside = outsidePath(target, workspace);
    if (outside !== undefined) return `it changes to ${outside}, outside the workspace`;
  }
  return undefined;
}

/** The first argument that may name a file outside the workspace. */
export function pathProblem(words: string[], workspace: string | undefined): string | undefined {
  for (const word of words) {
    const outside = outsidePath(word, workspace);
    if (outside !== undefined) return `it reads ${outside}, outside the workspace`;
  }
  return undefined;
}

/**
 * The path outside the workspace a literal word may name, or undefined. Braces expand first
 * (`{..,x}/f` names ../f); then the word itself, a value after `=` and a value attached to a short
 * option (`-f/etc/passwd`) are each read as a path.
 */
export function outsidePath(word: string, workspace: string | undefined): string | undefined {
  const expanded = braceExpansions(word);
  // Too many words to judge one by one: the word is not known to stay inside.
  if (expanded === undefined) return word;
  return expanded.flatMap(pathCandidates).find((path) => leavesWorkspace(path, workspace));
}

function pathCandidates(word: string): string[] {
  const candidates = [word];
  const equals = word.indexOf("=");
  // bash expands ~ after the = of a word like name=~/x, and after each : of its value.
  if (equals >= 0) candidates.push(...word.slice(equals + 1).split(":"));
  if (/^-[^-]/.test(word)) {
    // `cut -d/` and `sort -t/` take a character: a lone / attached to a short option is not the root.
    for (let i = 2; i < word.length; i++) if (word.slice(i) !== "/") candidates.push(word.slice(i));
  }
  return candidates;
}

/**
 * Whether a path leads outside the workspace, by its text alone: `~` and $HOME are outside, an
 * absolute path must be under the workspace, and a relative one must never climb (`..`) above where it
 * starts, even to come back (`../project/x`). Symbolic links are not seen: the sandbox confines those.
 */
function leavesWorkspace(path: string, workspace: string | undefined): boolean {
  if (HARMLESS_DEVICES.has(path)) return false;
  if (path.startsWith("~") || /^\$\{?HOME\b/.test(path)) return true;
  let rest = path;
  if (path.startsWith("/")) {
    if (workspace === undefined) return true;
    const root = resolve(workspace);
    if (path !== root && !path.startsWith(root === "/" ? "/" : `${root}/`)) return true;
    rest = path.slice(root.length);
  }
  let depth = 0;
  for (const part of rest.split("/")) {
    if (part === "..") depth--;
    else if (part !== "" && part !== ".") depth++;
    if (depth < 0) return true;
  }
  return false;
}

/** Brace expansions beyond this many words are not judged one by one. */
const MAX_EXPANSIONS = 256;

/**
 * The words bash makes of `{a,b}` groups, or undefined when there are too many. Sequences (`{1..3}`,
 * `{a..z}`) make only digits and letters, never `.`, `/` or `~`, so they are left as written. Quoted
 * braces are expanded too: that can only add words to judge.
 */
function braceExpansions(word: string): string[] | undefined {
  const done: string[] = [];
  const pending = [word];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const group = firstBraceGroup(next);
    if (group === undefined) done.push(next);
    else {
      const before = next.slice(0, group.start);
      const after = next.slice(group.end + 1);
      pending.push(...group.alternatives.map((alternative) => before + alternative + after));
    }
    if (done.length + pending.length > MAX_EXPANSIONS) return undefined;
  }
  return done;
}

/** The first `{…,…}` that bash expands: a `{` without a matching `}` and a comma is literal. */
function firstBraceGroup(word: string): { start: number; end: number; alternatives: string[] } | undefined {
  for (let start = word.indexOf("{"); start >= 0; start = word.indexOf("{", start + 1)) {
    let depth = 0;
    const commas: number[] = [];
    for (let i = start; i < word.length; i++) {
      if (word[i] === "{") depth++;
      else if (word[i] === "," && depth === 1) commas.push(i);
      else if (word[i] === "}" && --depth === 0) {
        if (commas.length === 0) break;
        const cuts = [start, ...commas, i];
        const alternatives = cuts.slice(1).map((cut, k) => word.slice((cuts[k] as number) + 1, cut));
        return { start, end: i, alternatives };
      }
    }
  }
  return undefined;
}
