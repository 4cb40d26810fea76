import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { findNatsServer } from "../../src/bus/embedded-nats.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK (outside review): bubblewrap and nats-server were looked up on PATH with its relative
 * entries, which resolve from where Troupe runs: in a cloned repository with `bin` on the user's
 * PATH, the repository's own bin/bwrap ran as the user, at the sandbox's probe and for every
 * "sandboxed" command after. Now only absolute PATH directories are searched. */

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function repository() {
  const { dir, dispose } = tempTree({ "README.md": "# a cloned repository\n" });
  cleanups.push(dispose);
  mkdirSync(join(dir, "bin"));
  for (const name of ["bwrap", "nats-server"]) {
    const fake = join(dir, "bin", name);
    writeFileSync(fake, `#!/bin/sh\necho "$0 $*" >> ${join(dir, `${name}-ran`)}\nexit 1\n`);
    chmodSync(fake, 0o755);
  }
  return dir;
}

it("troupe doctor in a repository with bin/bwrap, bin on PATH, never runs the repository's bwrap", async () => {
  const dir = repository();
  await runTroupe(["doctor"], {
    cwd: dir,
    env: { ...process.env, PATH: `bin:${process.env.PATH}`, NATS_URL: "nats://127.0.0.1:1" },
  });
  expect(existsSync(join(dir, "bwrap-ran"))).toBe(false);
});

it("the nats-server a daemon would start is never one of a relative PATH entry", () => {
  const dir = repository();
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    const found = findNatsServer({ PATH: "bin:/nonexistent" });
    expect(found === undefined || found.startsWith("/")).toBe(true);
    expect(found).not.toBe(join("bin", "nats-server"));
  } finally {
    process.chdir(cwd);
  }
});
