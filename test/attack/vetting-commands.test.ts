import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK (outside review): the commands a user runs to look at a cloned repository's config before
 * trusting it. `troupe trust` printed the config dir's real path raw (a directory named with escape
 * sequences cleared the screen and hid the warning); `troupe agents validate config --check-servers`
 * started the repository's MCP server as the user (naming the dir was taken for vouching for it); a
 * FIFO its config names (`mcpServersFrom`) hung `agents validate` and `trust` with no output. */

let dir: string;
let home: string;
const cleanups: Array<() => unknown> = [];
beforeEach(() => {
  const tree = tempTree({ "home/.keep": "" });
  dir = tree.dir;
  home = join(dir, "home");
  cleanups.push(tree.dispose);
});
afterEach(() => {
  for (const c of cleanups.splice(0).reverse()) c();
});
const troupe = (args: string[], cwd = join(dir, "repo")) => runTroupe(args, { cwd, env: { HOME: home } });
const ESC = new RegExp("[\u001b\u0007\u009b]");

it("troupe trust and trust --list show a config dir named with escape sequences as visible escapes", async () => {
  const named = join(dir, "repo", "x\u001b]0;PWNED\u0007\u001b[2J\u001b[31mFAKE");
  mkdirSync(join(named, "agents"), { recursive: true });
  writeFileSync(join(named, "troupe.yaml"), "defaultAgent: a\n");
  writeFileSync(join(named, "agents/a.yaml"), "name: a\ndescription: A.\ntools: [read_file]\n");
  symlinkSync(named, join(dir, "repo", "config"));
  const trusted = await troupe(["trust"]);
  expect(trusted.code).toBe(0);
  expect(trusted.stdout).toContain("trusted ");
  expect(trusted.stdout).toContain("\\e]0;PWNED\\x07\\e[2J\\e[31mFAKE");
  expect(trusted.stdout + trusted.stderr).not.toMatch(ESC);
  const listed = await troupe(["trust", "--list"]);
  expect(listed.stdout).toContain("\\e]0;PWNED");
  expect(listed.stdout + listed.stderr).not.toMatch(ESC);
});

it("agents validate DIR --check-servers starts nothing from a config dir the user has not trusted", async () => {
  const marker = join(dir, "PWNED");
  mkdirSync(join(dir, "repo/config/agents"), { recursive: true });
  writeFileSync(
    join(dir, "repo/config/troupe.yaml"),
    `defaultAgent: a\nmcpServers:\n  pwn:\n    command: sh\n    args: [-c, "touch ${marker}"]\n`,
  );
  writeFileSync(join(dir, "repo/config/agents/a.yaml"), "name: a\ndescription: A.\ntools: [read_file]\n");
  const result = await troupe(["agents", "validate", "config", "--check-servers"]);
  expect(result.stderr).toMatch(
    /^troupe: \S*config is a config dir you have not trusted [^\n]*troupe trust config\n$/,
  );
  expect(result.code).toBe(2);
  expect(existsSync(marker)).toBe(false);
  // Once trusted, the same command starts it: the check is the trust, not the command.
  expect((await troupe(["trust", "config"])).code).toBe(0);
  const checked = await troupe(["agents", "validate", "config", "--check-servers"]);
  expect(checked.stdout).toMatch(/^(ok {2}|fail) mcp pwn: /m);
});

it("a FIFO a config names is refused in one line by agents validate and trust, not waited on", async () => {
  mkdirSync(join(dir, "repo/config/agents"), { recursive: true });
  writeFileSync(join(dir, "repo/config/troupe.yaml"), "defaultAgent: a\nmcpServersFrom: [../.mcp.json]\n");
  writeFileSync(join(dir, "repo/config/agents/a.yaml"), "name: a\ndescription: A.\ntools: [read_file]\n");
  execFileSync("mkfifo", [join(dir, "repo/.mcp.json")]);
  for (const args of [["agents", "validate"], ["trust"]]) {
    const result = await troupe(args);
    expect(result.stderr).toMatch(
      /^\.mcp\.json:1:1: not a regular file: a config file is a file of its own\n$/m,
    );
    expect(result.code).toBe(2);
  }
}, 30_000);
