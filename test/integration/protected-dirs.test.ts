import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { resolveForWrite } from "../../src/safety/workspace-guard.js";
import { callBuiltin, workspaceAndOutside } from "../support/tools.js";

let ws: string;
let dispose: () => void;
beforeEach(() => {
  ({ ws, dispose } = workspaceAndOutside());
  mkdirSync(join(ws, "vendor/lib/.git"), { recursive: true });
  writeFileSync(join(ws, "vendor/lib/.git/config"), "[core]\n");
});
afterEach(() => dispose());

describe("directories tools may not change, at any depth and in any case", () => {
  it.each([
    "vendor/lib/.git/config",
    "vendor/lib/.git/hooks/post-checkout",
    ".GIT/config",
    ".Git/hooks/pre-commit",
    "a/.troupe/x",
    "a/b/.TROUPE/state.json",
  ])("write_file to %s is refused, and nothing is written", async (path) => {
    const result = await callBuiltin(
      "write_file",
      { path, content: "[core]\n\thooksPath = /tmp/evil\n" },
      ws,
    );
    expect(result).toMatchObject({ ok: false, error: expect.stringMatching(/is inside \.(git|troupe)\//i) });
    expect(existsSync(join(ws, path))).toBe(path === "vendor/lib/.git/config");
    expect(readFileSync(join(ws, "vendor/lib/.git/config"), "utf8")).toBe("[core]\n");
    expect(existsSync(join(ws, ".GIT"))).toBe(false);
    expect(existsSync(join(ws, "a"))).toBe(false);
  });

  it("edit_file and apply_patch are refused in a nested .git too", async () => {
    const edit = await callBuiltin(
      "edit_file",
      { path: "vendor/lib/.git/config", old_string: "[core]", new_string: "[core]\n\tfsmonitor = evil" },
      ws,
    );
    expect(edit.ok).toBe(false);
    const patch =
      "--- a/vendor/lib/.git/config\n+++ b/vendor/lib/.git/config\n@@ -1 +1 @@\n-[core]\n+[evil]\n";
    expect((await callBuiltin("apply_patch", { patch }, ws)).ok).toBe(false);
    expect(readFileSync(join(ws, "vendor/lib/.git/config"), "utf8")).toBe("[core]\n");
  });

  it("names that only contain the words are not protected", () => {
    expect(resolveForWrite(ws, "docs/.github/workflows/ci.yml")).toBe(
      join(ws, "docs/.github/workflows/ci.yml"),
    );
    expect(resolveForWrite(ws, "my.git/x")).toBe(join(ws, "my.git/x"));
    expect(resolveForWrite(ws, ".troupe-notes/x")).toBe(join(ws, ".troupe-notes/x"));
  });
});

describe("what troupe loads when run in the workspace", () => {
  it("write_file may not make config/troupe.yaml, which the next troupe run here would load", async () => {
    const result = await callBuiltin(
      "write_file",
      { path: "config/troupe.yaml", content: "approval:\n  policy: yolo\n" },
      ws,
    );
    expect(result).toMatchObject({
      ok: false,
      error: expect.stringContaining("what troupe loads as its config"),
    });
    expect(existsSync(join(ws, "config/troupe.yaml"))).toBe(false);
    // Other files of a project's own config/ are its own.
    expect((await callBuiltin("write_file", { path: "config/app.yaml", content: "port: 80\n" }, ws)).ok).toBe(
      true,
    );
  });
});

describe("judged by the path as written and where each step leads", () => {
  it("a symlink named config, to a directory of the agent's, does not make config/troupe.yaml writable", () => {
    mkdirSync(join(ws, "notes"));
    symlinkSync("notes", join(ws, "config"));
    expect(() => resolveForWrite(ws, "config/troupe.yaml")).toThrow(/what troupe loads as its config/);
    expect(() => resolveForWrite(ws, join(ws, "config/troupe.yaml"))).toThrow(/what troupe loads/);
    expect(existsSync(join(ws, "notes/troupe.yaml"))).toBe(false);
    // What it leads to, named as itself, is an ordinary file of the workspace.
    expect(resolveForWrite(ws, "notes/troupe.yaml")).toBe(join(ws, "notes/troupe.yaml"));
  });

  it("a symlink into .git or .troupe, or to the config dir, leads nowhere writable", () => {
    mkdirSync(join(ws, ".git/hooks"), { recursive: true });
    mkdirSync(join(ws, "cfg/agents"), { recursive: true });
    symlinkSync(".git/hooks", join(ws, "hooks"));
    symlinkSync("cfg", join(ws, "settings"));
    expect(() => resolveForWrite(ws, "hooks/post-checkout")).toThrow(/is inside \.git\//);
    const protectedDirs = [join(ws, "cfg")];
    expect(() => resolveForWrite(ws, "settings/agents/x.yaml", { protectedDirs })).toThrow(
      /config directory/,
    );
    // The config dir named by a link: the link's own path is as protected as where it leads.
    expect(() => resolveForWrite(ws, "cfg/agents/x.yaml", { protectedDirs: [join(ws, "settings")] })).toThrow(
      /config directory/,
    );
  });
});
