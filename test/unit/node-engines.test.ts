import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import semver from "semver";
import { describe, expect, it } from "vitest";

/*
 * npm warns EBADENGINE when a package it installs does not admit the running Node. What Troupe needs
 * is in package.json: `engines.node` to run it (the README's "Node.js 20+"), `devEngines` to build and
 * test it from a checkout. Every package of the lock must admit the lowest Node its side promises.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const read = (file: string) => readFileSync(join(ROOT, file), "utf8");

interface LockEntry {
  version?: string;
  dev?: boolean;
  devOptional?: boolean;
  engines?: { node?: string } | string[];
}

const pkg = JSON.parse(read("package.json")) as {
  engines: { node: string };
  devEngines: { runtime: { name: string; version: string } };
};
const lock = JSON.parse(read("package-lock.json")) as { packages: Record<string, LockEntry> };

function lowest(range: string): string {
  const found = semver.minVersion(range);
  if (!found) throw new Error(`no Node admits ${range}`);
  return found.version;
}

describe("the Node versions Troupe promises", () => {
  const runFloor = lowest(pkg.engines.node);
  const devFloor = lowest(pkg.devEngines.runtime.version);

  it("are admitted by every package npm installs (no EBADENGINE)", () => {
    const refused: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
      if (path === "" || range === undefined) continue;
      // A package only the tools need is held to what development needs, any other to what running needs.
      const floor = entry.dev || entry.devOptional ? devFloor : runFloor;
      if (!semver.satisfies(floor, range))
        refused.push(
          `${path.replace(/^.*node_modules\//, "")}@${entry.version}: node ${range} (not ${floor})`,
        );
    }
    expect(refused).toEqual([]);
  });

  it("are the ones the README states", () => {
    const readme = read("README.md");
    const said = (version: string) => `${semver.major(version)}.${semver.minor(version)}+`;
    expect(pkg.devEngines.runtime.name).toBe("node");
    // The run floor as the README says it: `Node.js 20+`, or with its minor, `Node.js 20.6+`.
    const run = semver.minor(runFloor) > 0 ? said(runFloor) : `${semver.major(runFloor)}+`;
    expect(readme).toContain(`Node.js ${run}`);
    // Every line of the development range (`^20.19.0 || >=22.12.0`), by its lowest version.
    for (const line of pkg.devEngines.runtime.version.split("||"))
      expect(readme).toContain(said(lowest(line)));
  });
});
