import { mkdirSync, mkdtempSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { ProtectedEntries, WorkspaceScanError } from "../../src/sandbox/protected-entries.js";

/* A directory whose name is not UTF-8 cannot be named by a string, so no mount can cover it: one
 * holding something protected fails the look before a command, and is reported after one. */

let ws: string;
afterEach(() => rmSync(ws, { recursive: true, force: true }));

const bytes = (...parts: Array<string | number[] | Buffer>) =>
  Buffer.concat(parts.map((part) => (typeof part === "string" ? Buffer.from(part) : Buffer.from(part))));

it("a .git under a name that is not UTF-8 fails the look before a command and is reported after one", () => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), "troupe-unnamed-")));
  const odd = bytes(`${ws}/n`, [0xff]);
  mkdirSync(bytes(odd, "/deep/.git"), { recursive: true });
  expect(() => new ProtectedEntries().find(ws)).toThrow(WorkspaceScanError);
  expect(() => new ProtectedEntries().find(ws)).toThrow(/\/n\\xff has a name that is not UTF-8/);
  expect(new ProtectedEntries().find(ws, { lenient: true }).unnamed).toEqual([odd]);
});

it("one that holds nothing protected is no matter", () => {
  ws = realpathSync(mkdtempSync(join(tmpdir(), "troupe-unnamed-")));
  mkdirSync(bytes(`${ws}/n`, [0xff], "/src"), { recursive: true });
  const found = new ProtectedEntries().find(ws);
  expect(found.unnamed).toEqual([]);
  expect(found.protected).toEqual([]);
});
