import { linkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { callBuiltin, workspaceAndOutside } from "../support/tools.js";

let ws: string;
let outside: string;
let dispose: () => void;
beforeEach(() => {
  ({ ws, outside, dispose } = workspaceAndOutside());
  writeFileSync(join(outside, "id_rsa"), "TOPSECRET private key\n");
  linkSync(join(outside, "id_rsa"), join(ws, "notes.txt"));
  writeFileSync(join(ws, "plain.txt"), "plain TOPSECRET-free text\n");
});
afterEach(() => dispose());

describe("a file with more than one hard link", () => {
  it("is not read by read_file, which says why and how to allow it", async () => {
    const result = await callBuiltin("read_file", { path: "notes.txt" }, ws);
    expect(result).toMatchObject({
      ok: false,
      output: "",
      error: expect.stringContaining("notes.txt has 2 hard links"),
      recoveryHint: expect.stringContaining("set sandbox.readHardLinks: true in troupe.yaml"),
    });
    expect(JSON.stringify(result)).not.toContain("TOPSECRET private");
  });

  it("is not searched by grep, which says it skipped it", async () => {
    const result = await callBuiltin("grep", { pattern: "TOPSECRET" }, ws);
    expect(result.ok).toBe(true);
    expect(result.output).not.toContain("private key");
    expect(result.output).toContain("[1 file with other hard links not searched");
    const named = await callBuiltin("grep", { pattern: "TOPSECRET", path: "notes.txt" }, ws);
    expect(named.output).not.toContain("private key");
  });

  it("is not read by edit_file either, whose miss would show the closest lines", async () => {
    const result = await callBuiltin(
      "edit_file",
      { path: "notes.txt", old_string: "guess", new_string: "x" },
      ws,
    );
    expect(result).toMatchObject({ ok: false, error: expect.stringContaining("hard links") });
    expect(JSON.stringify(result)).not.toContain("TOPSECRET private");
  });

  it("is read when the context allows it (sandbox.readHardLinks: true)", async () => {
    const read = await callBuiltin("read_file", { path: "notes.txt" }, ws, { readHardLinks: true });
    expect(read).toMatchObject({ ok: true, output: "1\tTOPSECRET private key" });
    const grep = await callBuiltin("grep", { pattern: "private" }, ws, { readHardLinks: true });
    expect(grep.output).toBe("notes.txt:1: TOPSECRET private key");
  });

  it("does not stop other files from being read", async () => {
    expect(await callBuiltin("read_file", { path: "plain.txt" }, ws)).toMatchObject({ ok: true });
  });
});
