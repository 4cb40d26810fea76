/**
 * What the bench scripts share in writing their results: medians, numbers as the tables show them,
 * and docs/bench.md, whose head is `npm run bench`'s and whose `## ` sections are other scripts'.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

export function format(value: number): string {
  if (value >= 100) return Math.round(value).toLocaleString("en-US");
  return value >= 1 ? value.toFixed(1) : value.toFixed(3);
}

/** The `## ` sections of `file` (from the first on, with its leading newline), or "" if none. */
export function sectionsOf(file: string): string {
  const text = existsSync(file) ? readFileSync(file, "utf8") : "";
  const at = text.indexOf("\n## ");
  return at < 0 ? "" : text.slice(at);
}

/** Writes `section` (begun with its `## ` heading) in place of the one of that heading, or at the end. */
export function writeSection(file: string, section: string): void {
  const heading = section.slice(0, section.indexOf("\n"));
  const text = existsSync(file) ? readFileSync(file, "utf8") : "";
  const at = text.indexOf(`\n${heading}\n`);
  const before = at < 0 ? text.trimEnd() : text.slice(0, at).trimEnd();
  const rest = at < 0 ? "" : text.slice(at + heading.length + 1);
  const next = rest.search(/\n## /);
  writeFileSync(file, `${before}\n\n${section.trimEnd()}\n${next < 0 ? "" : rest.slice(next)}`);
}

/**
 * Formats what a bench wrote (paths from the repository's `root`) as the formatter would, so fresh
 * results can be committed as they are.
 */
export function formatWritten(root: string, files: string[]): void {
  spawnSync(join(root, "node_modules/.bin/biome"), ["format", "--write", ...files], {
    cwd: root,
    stdio: "ignore",
  });
}
