/** Commands destructive enough to deny under every policy but yolo, seen through the wrappers that run them. */

import { basename } from "node:path";

import { DOWNLOADERS, INTERPRETERS, SHELLS, WRAPPERS } from "./command-lists.js";
import type { CommandSegment } from "./command-segment.js";

/** Why a segment is destructive, or undefined. */
export function dangerOf(
  segment: CommandSegment,
  all: CommandSegment[],
  workspace: string | undefined,
): string | undefined {
  const argv = unwrap(segment.argv);
  const [name, ...args] = argv;
  if (name === null || name === undefined) return undefined;
  const base = basename(name);
  const words = args.filter((a): a is string => a !== null);
  if (base === "rm") {
    const flags = words.filter((a) => a.startsWith("-") && a !== "--");
    const recursive = flags.some((f) => /^-[^-]*[rR]/.test(f) || f === "--recursive");
    const roots = new Set([
      "/",
      "/*",
      "~",
      "~/",
      "~/*",
      "$HOME",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's own spelling of $HOME
      "${HOME}",
      "$HOME/",
      ".",
      "./",
      "./*",
      "*",
      "..",
      "../",
    ]);
    if (workspace) roots.add(workspace).add(`${workspace}/`).add(`${workspace}/*`);
    const target = words.filter((a) => !a.startsWith("-")).find((a) => roots.has(a));
    if (recursive && target !== undefined) return `rm -r of ${target}`;
  }
  if (base.startsWith("mkfs")) return "mkfs formats a disk";
  if (base === "dd" && words.some((a) => /^of=\/dev\//.test(a))) return "dd onto a device";
  if (
    base === "chmod" &&
    words.some((a) => a === "-R" || a === "--recursive") &&
    words.some((a) => /^(0?777|a\+rwx|ugo\+rwx)$/.test(a))
  ) {
    return "chmod -R 777";
  }
  if (
    ["shutdown", "reboot", "halt", "poweroff"].includes(base) ||
    (base === "init" && (words[0] === "0" || words[0] === "6"))
  ) {
    return `${base} stops the machine`;
  }
  if ((SHELLS.has(base) || INTERPRETERS.has(base)) && segment.pipelineIndex > 0) {
    const earlier = all.filter(
      (s) => s.pipeline === segment.pipeline && s.pipelineIndex < segment.pipelineIndex,
    );
    if (earlier.some((s) => DOWNLOADERS.has(basename(unwrap(s.argv)[0] ?? ""))))
      return "a download piped into a shell";
  }
  return undefined;
}

/** `sudo -u x rm …` → `rm …`: wrappers that run another command are looked through. */
function unwrap(argv: Array<string | null>): Array<string | null> {
  let rest = argv;
  while (rest.length > 0 && rest[0] !== null && WRAPPERS.has(basename(rest[0] as string))) {
    rest = rest.slice(1);
    while (
      rest.length > 0 &&
      typeof rest[0] === "string" &&
      (rest[0].startsWith("-") || /^\d+[smhd]?$/.test(rest[0]))
    )
      rest = rest.slice(1);
  }
  return rest;
}
