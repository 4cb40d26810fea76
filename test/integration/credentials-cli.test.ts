import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { runTroupe, tempTree } from "../support/cli.js";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

it("troupe credentials ROLE in a data dir no daemon has used says so in one line and makes no seeds", async () => {
  const { dir, dispose } = tempTree({ "config/troupe.yaml": "nats:\n  prefix: creds\n" });
  cleanups.push(dispose);
  for (const args of [["credentials", "client"], ["credentials"], ["credentials", "--ca"]]) {
    const result = await runTroupe(["--config", join(dir, "config"), ...args], { cwd: dir });
    expect(result.code, args.join(" ")).toBe(2);
    expect(result.stderr.trim().split("\n")).toHaveLength(1);
    expect(result.stderr).toMatch(
      new RegExp(`^troupe: no (credentials|CA) in data dir ${join(dir, ".data")}: `),
    );
  }
  expect(existsSync(join(dir, ".data", "credentials", "client.nk"))).toBe(false);
  // A server config is made to be used with new seeds: those are made.
  const config = await runTroupe(["--config", join(dir, "config"), "credentials", "--server-config"], {
    cwd: dir,
  });
  expect(config.code).toBe(0);
  expect(existsSync(join(dir, ".data", "credentials", "client.nk"))).toBe(true);
});
