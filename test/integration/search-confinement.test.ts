import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { callBuiltin, workspaceAndOutside } from "../support/tools.js";

let ws: string;
let outside: string;
let dispose: () => void;
beforeEach(() => {
  ({ ws, outside, dispose } = workspaceAndOutside());
  writeFileSync(join(ws, "inside.txt"), "nothing to see\n");
  writeFileSync(join(outside, "secret.txt"), "TOPSECRET outside\n");
  mkdirSync(join(outside, "home/someone"), { recursive: true });
  writeFileSync(join(outside, "home/someone/.netrc"), "TOPSECRET machine login\n");
});
afterEach(() => dispose());

describe("glob and grep patterns are relative to the workspace", () => {
  it.each([
    ["grep", { pattern: "TOPSECRET", glob: "../outside/*" }, /climbs with "\.\."/],
    ["grep", { pattern: "root", glob: "/etc/passwd" }, /is absolute/],
    ["grep", { pattern: "TOPSECRET", glob: "{..,x}/outside/*" }, /climbs with "\.\."/],
    ["grep", { pattern: "TOPSECRET", glob: "inside/../../outside/*" }, /climbs with "\.\."/],
    ["glob", { pattern: "../**" }, /climbs with "\.\."/],
    ["glob", { pattern: "../outside/*" }, /climbs with "\.\."/],
    ["glob", { pattern: "~/*" }, /is absolute/],
  ])("%s %j is refused", async (tool, args, error) => {
    const result = await callBuiltin(tool, args, ws);
    expect(result).toMatchObject({ ok: false, error: expect.stringMatching(error), output: "" });
    expect(result.recoveryHint).toBeTruthy();
  });

  it("an absolute pattern naming a home directory outside is refused, and nothing is listed", async () => {
    const result = await callBuiltin("glob", { pattern: `${outside}/home/*/.*` }, ws);
    expect(result).toMatchObject({ ok: false, error: expect.stringMatching(/is absolute/) });
    expect(JSON.stringify(result)).not.toContain(".netrc");
    const grep = await callBuiltin("grep", { pattern: "TOPSECRET", glob: `${outside}/home/*/.*` }, ws);
    expect(grep).toMatchObject({ ok: false, error: expect.stringMatching(/is absolute/) });
  });
});

describe("what a pattern finds is held to the workspace where it is used", () => {
  beforeEach(() => symlinkSync(outside, join(ws, "link")));

  it("glob prunes results under a symlinked directory that leads outside", async () => {
    for (const pattern of ["link/*", "link/**", "link/home/*/.*", "**/*"]) {
      const result = await callBuiltin("glob", { pattern }, ws);
      expect(result.ok).toBe(true);
      expect(result.output).not.toMatch(/secret\.txt|\.netrc/);
    }
  });

  it("grep reads nothing under it", async () => {
    for (const glob of ["link/**", "link/*", "link/home/*/.*", "**/*"]) {
      const result = await callBuiltin("grep", { pattern: "TOPSECRET", glob }, ws);
      expect(result).toMatchObject({ ok: true, output: "(no matches)" });
    }
  });

  it("a symlinked directory that stays inside is still searched", async () => {
    mkdirSync(join(ws, "real"));
    writeFileSync(join(ws, "real/found.txt"), "needle\n");
    symlinkSync(join(ws, "real"), join(ws, "alias"));
    expect((await callBuiltin("glob", { pattern: "alias/*" }, ws)).output).toBe("alias/found.txt");
    expect((await callBuiltin("grep", { pattern: "needle", glob: "alias/*" }, ws)).output).toBe(
      "alias/found.txt:1: needle",
    );
  });
});
