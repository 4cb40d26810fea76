import { expect, it } from "vitest";
import { migrateVersioned, type VersionStep, versionOf } from "../../src/util/record-versions.js";

const steps: VersionStep[] = [
  { from: 2, to: 3, why: "b", migrate: (record) => ({ ...record, v: 3, b: true }) },
  { from: 1, to: 2, why: "a", migrate: (record) => ({ ...record, v: 2, a: true }) },
];

it("brings a record up to the current version step by step, whatever order the steps are listed in", () => {
  const stored = { v: 1, x: 1 };
  expect(migrateVersioned(stored, 3, steps)).toEqual({ record: { v: 3, x: 1, a: true, b: true }, from: 1 });
  expect(stored).toEqual({ v: 1, x: 1 });
  expect(migrateVersioned({ v: 2, x: 1 }, 3, steps)).toEqual({ record: { v: 3, x: 1, b: true }, from: 2 });
});

it("reads a record that names no version as version 1", () => {
  expect(versionOf({ x: 1 })).toBe(1);
  expect(versionOf({ v: 3 })).toBe(3);
  expect(migrateVersioned({ x: 1 }, 3, steps)).toEqual({ record: { x: 1, v: 3, a: true, b: true }, from: 1 });
  expect(migrateVersioned({ x: 1 }, 1, [])).toEqual({ record: { x: 1, v: 1 }, from: 1 });
});

it("gives a record of the current version as it is", () => {
  const stored = { v: 3, x: 1 };
  expect(migrateVersioned(stored, 3, steps)).toEqual({ record: stored, from: 3 });
});

it("refuses a version no step starts from, saying which and which this one reads", () => {
  expect(migrateVersioned({ v: 4 }, 3, steps)).toEqual({ refused: "v4; this one reads v3" });
  expect(migrateVersioned({ v: "3" }, 3, steps)).toEqual({ refused: 'v"3"; this one reads v3' });
  expect(migrateVersioned({ v: 0 }, 3, steps)).toEqual({ refused: "v0; this one reads v3" });
});
