import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PathChangedError, removeFile, replaceFile } from "../../src/safety/replace-file.js";
import { resolveForWrite } from "../../src/safety/workspace-guard.js";
import { callBuiltin, workspaceAndOutside } from "../support/tools.js";

let ws: string;
let outside: string;
let dispose: () => void;
const SECRET = "outside: must not change\n";
beforeEach(() => {
  ({ ws, outside, dispose } = workspaceAndOutside());
  writeFileSync(join(outside, "target.txt"), SECRET);
});
afterEach(() => dispose());

describe("replaceFile and removeFile, after the guard has resolved the path", () => {
  it("replace a target swapped for a symlink meanwhile; the file it leads to is unchanged", async () => {
    writeFileSync(join(ws, "a.txt"), "old\n");
    const real = resolveForWrite(ws, "a.txt");
    rmSync(join(ws, "a.txt"));
    symlinkSync(join(outside, "target.txt"), join(ws, "a.txt"));
    await replaceFile(real, "written\n");
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe(SECRET);
    expect(lstatSync(join(ws, "a.txt")).isFile()).toBe(true);
    expect(readFileSync(join(ws, "a.txt"), "utf8")).toBe("written\n");
  });

  it("refuse when a parent was swapped for a symlink meanwhile, writing nothing there", async () => {
    mkdirSync(join(ws, "dir"));
    const real = resolveForWrite(ws, "dir/target.txt");
    renameSync(join(ws, "dir"), join(ws, "dir-moved"));
    symlinkSync(outside, join(ws, "dir"));
    await expect(replaceFile(real, "written\n")).rejects.toBeInstanceOf(PathChangedError);
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe(SECRET);
    await expect(removeFile(real)).rejects.toBeInstanceOf(PathChangedError);
    expect(existsSync(join(outside, "target.txt"))).toBe(true);
  });

  it("refuse when a missing parent appears as a symlink meanwhile, creating nothing outside", async () => {
    const real = resolveForWrite(ws, "new/deeper/file.txt");
    symlinkSync(outside, join(ws, "new"));
    await expect(replaceFile(real, "written\n")).rejects.toBeInstanceOf(PathChangedError);
    expect(existsSync(join(outside, "deeper"))).toBe(false);
  });

  it("keep the old file's mode, and leave no temporary file behind", async () => {
    writeFileSync(join(ws, "run.sh"), "#!/bin/sh\n", { mode: 0o750 });
    await replaceFile(resolveForWrite(ws, "run.sh"), "#!/bin/sh\necho hi\n");
    expect(statSync(join(ws, "run.sh")).mode & 0o777).toBe(0o750);
    expect(readFileSync(join(ws, "run.sh"), "utf8")).toBe("#!/bin/sh\necho hi\n");
    expect(readdirSync(ws)).toEqual(["run.sh"]);
  });
});

describe("the write tools on a file hard-linked to one outside the workspace", () => {
  beforeEach(() => linkSync(join(outside, "target.txt"), join(ws, "linked.txt")));

  it("write_file replaces the workspace's name, and the outside file is unchanged", async () => {
    const result = await callBuiltin("write_file", { path: "linked.txt", content: "pwned\n" }, ws);
    expect(result.ok).toBe(true);
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe(SECRET);
    expect(readFileSync(join(ws, "linked.txt"), "utf8")).toBe("pwned\n");
  });

  it("edit_file (allowed to read it) replaces it, and the outside file is unchanged", async () => {
    const result = await callBuiltin(
      "edit_file",
      { path: "linked.txt", old_string: "must not change", new_string: "pwned" },
      ws,
      { readHardLinks: true },
    );
    expect(result.ok).toBe(true);
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe(SECRET);
    expect(readFileSync(join(ws, "linked.txt"), "utf8")).toBe("outside: pwned\n");
  });

  it("apply_patch (allowed to read it) replaces it, and the outside file is unchanged", async () => {
    const patch = [
      "--- a/linked.txt",
      "+++ b/linked.txt",
      "@@ -1 +1 @@",
      "-outside: must not change",
      "+outside: pwned",
      "",
    ].join("\n");
    const result = await callBuiltin("apply_patch", { patch }, ws, { readHardLinks: true });
    expect(result).toMatchObject({ ok: true, output: "patched linked.txt" });
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe(SECRET);
    expect(readFileSync(join(ws, "linked.txt"), "utf8")).toBe("outside: pwned\n");
  });

  it("apply_patch's deletion removes only the workspace's name", async () => {
    const patch = [
      "--- a/linked.txt",
      "+++ /dev/null",
      "@@ -1 +0,0 @@",
      "-outside: must not change",
      "",
    ].join("\n");
    const result = await callBuiltin("apply_patch", { patch }, ws, { readHardLinks: true });
    expect(result).toMatchObject({ ok: true, output: "deleted linked.txt" });
    expect(existsSync(join(ws, "linked.txt"))).toBe(false);
    expect(readFileSync(join(outside, "target.txt"), "utf8")).toBe(SECRET);
  });
});
