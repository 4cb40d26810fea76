#!/usr/bin/env node
// Finds import cycles among the TypeScript modules under a directory (default src), type-only imports
// included: a cycle of types still ties two modules together. Prints each cycle once and exits 1 when
// there is any; prints "no import cycles in N modules" and exits 0 otherwise.
import { readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { tsModules } from "./ts-modules.mjs";

const root = resolve(process.argv[2] ?? "src");
const modules = tsModules(root);

const known = new Set(modules);
const imports = new Map();
const specifier = /(?:^|\n)\s*(?:import|export)\s[^;]*?\sfrom\s+["'](\.[^"']+)["']/g;
for (const file of modules) {
  const text = readFileSync(file, "utf8");
  const targets = new Set();
  for (const match of text.matchAll(specifier)) {
    const target = resolve(dirname(file), match[1].replace(/\.js$/, ".ts"));
    if (known.has(target)) targets.add(target);
  }
  imports.set(file, [...targets]);
}

const cycles = new Map();
const state = new Map();
const stack = [];
const visit = (file) => {
  state.set(file, "open");
  stack.push(file);
  for (const next of imports.get(file)) {
    if (state.get(next) === "open") {
      const cycle = stack.slice(stack.indexOf(next)).map((path) => relative(process.cwd(), path));
      const start = cycle.indexOf([...cycle].sort()[0]);
      const key = [...cycle.slice(start), ...cycle.slice(0, start)].join(" → ");
      cycles.set(key, true);
    } else if (!state.has(next)) visit(next);
  }
  stack.pop();
  state.set(file, "done");
};
for (const file of modules) if (!state.has(file)) visit(file);

for (const cycle of cycles.keys()) process.stdout.write(`cycle: ${cycle} → (back to the first)\n`);
if (cycles.size > 0) {
  process.stdout.write(
    `${`${cycles.size} import cycle${cycles.size === 1 ? "" : "s"} in ${modules.length} modules`}\n`,
  );
  process.exit(1);
}
process.stdout.write(`no import cycles in ${modules.length} modules\n`);
