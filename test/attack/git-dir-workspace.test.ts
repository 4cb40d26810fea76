import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";
import { embeddedDaemon } from "../support/embedded-daemon.js";

/* ATTACK: a git directory, or a part of one, as the workspace (`-w ws/.git`, `runs.start` with
 * `workspace: <ws>/.git` inside daemon.workspaces). The sandbox keeps every .git *in* a workspace
 * read-only, not the workspace itself: under auto-edit, write_file `config` set core.fsmonitor and
 * `hooks/post-checkout` without asking, and the user's next `git status` ran it. The same for a bare
 * repository, and for Troupe's own data and config dirs. Each is refused before any model call, in
 * one line, exit 2. */

const FILES = {
  "config/troupe.yaml":
    "defaultAgent: coder\ndefaultModel: scripted\ndaemon:\n  workspaces: [../ws, ../bare.git]\n",
  "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file, shell]\n",
  "ws/app.js": "export const port = 80;\n",
};
const PLANT = [
  { name: "write_file", arguments: { path: "config", content: "[core]\n\tfsmonitor = touch /tmp/pwned\n" } },
  {
    name: "write_file",
    arguments: { path: "hooks/post-checkout", content: "#!/bin/sh\ntouch /tmp/pwned\n" },
  },
];

let server: ScriptedModelServer;
const cleanups: Array<() => unknown> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: PLANT } },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  cleanups.push(() => server.close());
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The project's repository and a bare one beside it; what their configs hold now. */
function repositories(dir: string) {
  execFileSync("git", ["init", "-q", join(dir, "ws")]);
  execFileSync("git", ["init", "-q", "--bare", join(dir, "bare.git")]);
  mkdirSync(join(dir, ".data"), { recursive: true });
  const configs = () =>
    [join(dir, "ws/.git/config"), join(dir, "bare.git/config")].map((f) => readFileSync(f, "utf8"));
  return { before: configs(), configs };
}

function expectNothingWritten(dir: string, before: string[], configs: () => string[]) {
  expect(configs()).toEqual(before);
  for (const hooks of ["ws/.git/hooks", "bare.git/hooks", "ws/.git", "bare.git"])
    expect(existsSync(join(dir, hooks, "post-checkout"))).toBe(false);
  expect(server.requests).toHaveLength(0);
}

const REFUSED =
  /^troupe: workspace \S+ is inside \S+(, a git directory \(it holds HEAD, objects\/ and refs\/\), which git|, which git or Troupe) runs code from: name the project's own directory\n$/;

describe("troupe run --local -w", () => {
  let dir: string;
  beforeEach(() => {
    const tree = tempTree(FILES);
    dir = tree.dir;
    cleanups.push(tree.dispose);
  });

  it.each([
    ["ws/.git", REFUSED],
    ["ws/.git/hooks", REFUSED],
    ["bare.git", REFUSED],
    ["bare.git/hooks", REFUSED],
    [
      ".data",
      /^troupe: workspace \S+ is inside troupe's data directory \S+: name the project's own directory\n$/,
    ],
    [
      "config",
      /^troupe: workspace \S+ is inside the config directory \S+, which troupe loads at start: name the project's own directory\n$/,
    ],
  ])("%s is refused in one line, exit 2, before anything is written", async (workspace, line) => {
    const { before, configs } = repositories(dir);
    const result = await runTroupe(
      ["--config", "config", "run", "--local", "--approval", "auto-edit", "-w", workspace, "set it up"],
      { cwd: dir, env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" } },
    );
    expect(result.stderr).toMatch(line);
    expect(result.code).toBe(2);
    expectNothingWritten(dir, before, configs);
  });
});

it("a daemon refuses runs.start in ws/.git (inside daemon.workspaces), and a bare repository, in one line", async () => {
  const daemon = await embeddedDaemon(FILES, server.baseURL, cleanups);
  const { before, configs } = repositories(daemon.dir);
  await daemon.start();
  for (const workspace of ["ws/.git", "bare.git"]) {
    const result = await runTroupe(
      [...daemon.cfg, "run", "--approval", "auto-edit", "-w", workspace, "set it up"],
      {
        cwd: daemon.dir,
        env: daemon.env,
      },
    );
    expect(result.stderr).toMatch(REFUSED);
    expect(result.code).toBe(2);
  }
  expectNothingWritten(daemon.dir, before, configs);
}, 60_000);
