// The TypeScript modules under a directory, recursively: every `.ts` file but declarations. Shared
// by the checks `npm run check` runs (check-cycles, check-layers, long-functions).
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

export function tsModules(root) {
  const modules = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) modules.push(path);
    }
  };
  walk(root);
  return modules;
}
