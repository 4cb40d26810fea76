import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
// @ts-expect-error: a plain script, without types
import { LAYERS } from "../../scripts/check-layers.mjs";

const ROOT = resolve(import.meta.dirname, "../..");
const SCRIPT = join(ROOT, "scripts/check-layers.mjs");
const architecture = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");

const check = (src: string) => spawnSync(process.execPath, [SCRIPT, src], { cwd: ROOT, encoding: "utf8" });

describe("the layers of src/", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const copyOfSrc = () => {
    const dir = mkdtempSync(join(tmpdir(), "troupe-layers-"));
    dirs.push(dir);
    cpSync(join(ROOT, "src"), join(dir, "src"), { recursive: true });
    return join(dir, "src");
  };

  it("hold in this tree", () => {
    const run = check("src");
    expect(run.stdout).toMatch(/no import runs up/);
    expect(run.status).toBe(0);
  });

  it("fail on an import that runs back up: the agent host reading a limit from the daemon's API", () => {
    const src = copyOfSrc();
    appendFileSync(join(src, "actors/agent-stream.ts"), '\nexport { LIST_TEXT } from "../daemon/api.js";\n');
    const run = check(src);
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(
      /actors\/agent-stream\.ts → .*daemon\/api\.ts \(actors imports daemon, a higher layer\)/,
    );
  });

  it("fail on a dynamic import that runs up, and on a folder nobody placed", () => {
    const src = copyOfSrc();
    appendFileSync(
      join(src, "config/load.ts"),
      '\nexport const later = () => import("../bus/nats-bus.js");\n',
    );
    writeFileSync(join(src, "stray.ts"), "export const x = 1;\n");
    const run = check(src);
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(/config\/load\.ts → .*bus\/nats-bus\.ts \(config imports bus/);
    expect(run.stdout).toMatch(/stray\.ts: not in LAYERS/);
  });

  it("are the ones docs/architecture.md lists, in its order, and every path it names exists", () => {
    const layout = architecture.slice(architecture.indexOf("## Layout"));
    const block = layout.slice(layout.indexOf("```") + 3, layout.indexOf("```", layout.indexOf("```") + 3));
    const listed = [...block.matchAll(/^src\/([a-z.-]+)/gm)].map((match) =>
      (match[1] as string).replace(/\/$/, ""),
    );
    const inScript = (LAYERS as string[][]).flat();
    // The doc lists each layer once in the script's order (index.ts stands for its row with library.ts).
    expect(listed).toEqual(inScript.filter((name) => name !== "library.ts"));
    for (const [, path] of architecture.matchAll(
      /(?<![\w.~/])`?((?:src|test|scripts|docs|config|web|deploy|bin)\/[\w./-]+\.(?:ts|mjs|js|md|yaml))(?!\w)`?/g,
    ))
      expect(existsSync(join(ROOT, path as string)), path).toBe(true);
    // A file named alone (`agent-rules.ts`) is one of src/'s.
    const files = new Set(
      (readdirSync(join(ROOT, "src"), { recursive: true }) as string[]).map((path) => basename(path)),
    );
    for (const [, name] of architecture.matchAll(/`([\w-]+\.ts)`/g))
      expect(files.has(name as string), name).toBe(true);
  });
});
