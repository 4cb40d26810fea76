import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK (outside review): `troupe run -w ~/.config "tidy my nvim config"` under auto-edit. The
 * agent wrote ~/.config/git/config (core.pager, core.fsmonitor) without being asked, and the user's
 * next `git log`, in any repository, ran it outside the sandbox. A workspace that holds the home
 * directory was refused; its settings directories, its keys and the directories on its PATH were
 * not. Each is refused now, before any model call; one program's own directory is still a project. */

const PLANT = [
  {
    name: "write_file",
    arguments: { path: "git/config", content: "[core]\n\tpager = touch /tmp/pwned; less\n" },
  },
  { name: "write_file", arguments: { path: "ls", content: "#!/bin/sh\ntouch /tmp/pwned\n" } },
];

let server: ScriptedModelServer;
let dir: string;
const cleanups: Array<() => unknown> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: PLANT }, times: 10 },
    { match: { turn: 2 }, reply: { text: "tidied" }, times: 10 },
  );
  cleanups.push(() => server.close());
  const tree = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file]\n",
    "home/.config/nvim/init.vim": "set nu\n",
    "home/.local/bin/tool": "#!/bin/sh\n",
    "home/.ssh/known_hosts": "",
    "home/.gnupg/gpg.conf": "",
  });
  dir = tree.dir;
  cleanups.push(tree.dispose);
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const run = (workspace: string) =>
  runTroupe(
    ["--config", "config", "run", "--local", "--approval", "auto-edit", "-w", workspace, "tidy my config"],
    {
      cwd: dir,
      env: {
        HOME: join(dir, "home"),
        PATH: `${join(dir, "home/.local/bin")}:${process.env.PATH}`,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "",
      },
    },
  );

it.each([
  ["home/.config", /is \S+\/home\/\.config, where git, your shell and other programs read their settings/],
  ["home/.local", /is \S+\/home\/\.local, where git, your shell and other programs read their settings/],
  ["home/.ssh", /is inside \S+\/home\/\.ssh, whose keys and settings ssh or gpg act on/],
  ["home/.gnupg", /is inside \S+\/home\/\.gnupg, whose keys and settings ssh or gpg act on/],
  ["home/.local/bin", /is inside \S+\/home\/\.local\/bin, a directory on PATH: a file written there runs/],
])("-w %s is refused in one line, exit 2, before the model is asked", async (workspace, why) => {
  const before = readdirSync(join(dir, workspace)).sort();
  const result = await run(workspace);
  expect(result.stderr).toMatch(new RegExp(`^troupe: workspace \\S+ ${why.source}[^\\n]*\\n$`));
  expect(result.code).toBe(2);
  expect(server.requests).toHaveLength(0);
  expect(readdirSync(join(dir, workspace)).sort()).toEqual(before);
  expect(existsSync(join(dir, "home/.config/git"))).toBe(false);
});

it("one program's own settings directory (-w ~/.config/nvim) is a project: the run goes on, writing only there", async () => {
  mkdirSync(join(dir, "home/.config/nvim/git"));
  const result = await run("home/.config/nvim");
  expect(result.stderr).not.toContain("troupe: workspace");
  expect(result.code).toBe(0);
  expect(existsSync(join(dir, "home/.config/nvim/git/config"))).toBe(true);
  expect(existsSync(join(dir, "home/.config/git"))).toBe(false);
});
