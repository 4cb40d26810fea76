// Builds the web console the daemon serves (web/ → dist/console/): one bundle, no network at run time.
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const out = join(root, "dist/console");
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [join(root, "web/src/main.tsx")],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  jsx: "automatic",
  jsxImportSource: "preact",
  outfile: join(out, "app.js"),
  logLevel: "warning",
});
copyFileSync(join(root, "web/src/app.css"), join(out, "app.css"));
copyFileSync(join(root, "web/index.html"), join(out, "index.html"));
