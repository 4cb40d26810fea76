#!/usr/bin/env node
// Holds the layers of src/: each folder (and each file at the top of src/) has a place in LAYERS, low
// to high, and a module may import only from its own layer or one below it, type-only imports
// included. Any import that runs back up is printed as `file → file (layer → higher layer)` and the
// script exits 1; otherwise it prints "N modules in N layers, no import runs up" and exits 0. A
// folder or top file that LAYERS does not place is an error too: a new one is placed on purpose.
// docs/architecture.md ("Layers") explains each; test/unit/layers.test.ts holds the two equal.
import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { tsModules } from "./ts-modules.mjs";

/** Low to high. A layer is a folder of src/ or a file at its top; a row may hold several of either. */
export const LAYERS = [
  ["util", "errors.ts", "log.ts", "limits.ts"],
  ["events"],
  ["safety"],
  ["config"],
  ["trust"],
  ["sandbox"],
  ["bus"],
  ["approvals"],
  ["model"],
  ["context"],
  ["skills"],
  ["tools"],
  ["machines"],
  ["telemetry"],
  ["actors"],
  ["daemon"],
  ["web"],
  ["testing"],
  ["compose"],
  ["cli"],
  ["index.ts", "library.ts"],
];

/** What goes against LAYERS in the modules under `root`: one line each. */
export function layerProblems(root) {
  const rank = new Map(LAYERS.flatMap((row, at) => row.map((name) => [name, at])));
  const placeOf = (file) => relative(root, file).split(sep)[0];

  const modules = tsModules(root);

  const problems = [];
  const unplaced = new Set(modules.map(placeOf).filter((place) => !rank.has(place)));
  for (const place of unplaced)
    problems.push(
      `${join(relative(process.cwd(), root), place)}: not in LAYERS (scripts/check-layers.mjs): place it`,
    );

  const known = new Set(modules);
  // Static imports and re-exports, and `import("…")` (the CLI loads its heavy modules in each action).
  const specifier = /(?:(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+|\bimport\(\s*)["'](\.[^"']+)["']/g;
  for (const file of modules) {
    const from = placeOf(file);
    for (const match of readFileSync(file, "utf8").matchAll(specifier)) {
      const target = resolve(dirname(file), match[1].replace(/\.js$/, ".ts"));
      if (!known.has(target)) continue;
      const to = placeOf(target);
      if (rank.has(from) && rank.has(to) && rank.get(to) > rank.get(from))
        problems.push(
          `${relative(process.cwd(), file)} → ${relative(process.cwd(), target)} (${from} imports ${to}, a higher layer)`,
        );
    }
  }

  return { problems, modules: modules.length };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { problems, modules } = layerProblems(resolve(process.argv[2] ?? "src"));
  for (const problem of problems) process.stdout.write(`${problem}\n`);
  if (problems.length > 0) {
    process.stdout.write(`${problems.length} import${problems.length === 1 ? "" : "s"} against the layers\n`);
    process.exit(1);
  }
  process.stdout.write(`${modules} modules in ${LAYERS.length} layers, no import runs up\n`);
}
