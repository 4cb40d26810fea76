import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

/* ATTACK: a directory git takes for a repository, planted in the workspace. Git looking for a
 * repository takes any directory holding HEAD, objects and refs for a git dir, and runs what its
 * config says (core.fsmonitor with core.worktree) at the user's next `git status` there. Under
 * auto-edit the write tools completed that shape file by file; objects and refs as symlinks, or the
 * directory under a name that is not UTF-8, hid it from the sandbox's look after a command. Each is
 * run by the scripted model through `troupe run`, then the user's own git runs in the directory. */

let server: ScriptedModelServer;
let dir: string;
const cleanups: Array<() => unknown> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  cleanups.push(() => server.close());
  const tree = tempTree({
    "config/troupe.yaml": "defaultAgent: coder\ndefaultModel: scripted\n",
    "config/agents/coder.yaml": "name: coder\ndescription: Codes.\ntools: [write_file, shell]\n",
    "ws/app.js": "export const port = 80;\n",
  });
  dir = tree.dir;
  cleanups.push(tree.dispose);
});
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const marker = () => join(dir, "MARKER");
const config = () =>
  `[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ${join(dir, "ws")}\n\tfsmonitor = "touch ${marker()}"\n`;

/** The user's own `git status` in a directory of the workspace, with a HOME and no system config of the test's. */
function userGitStatus(at: string): void {
  try {
    execFileSync("git", ["status"], {
      cwd: at,
      stdio: "ignore",
      env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1", GIT_CEILING_DIRECTORIES: dir },
    });
  } catch {}
}

async function run(...calls: Array<{ name: string; arguments: Record<string, unknown> }>) {
  server.script(...calls.map((call, i) => ({ match: { turn: i + 1 }, reply: { toolCalls: [call] } })), {
    match: { turn: calls.length + 1 },
    reply: { text: "done" },
  });
  const result = await runTroupe(
    ["--config", "config", "run", "--local", "--approval", "auto-edit", "-w", "ws", "set it up"],
    { cwd: dir, env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "", HOME: dir } },
  );
  expect(result.code, result.stderr).toBe(0);
  return result;
}

const write = (path: string, content: string) => ({ name: "write_file", arguments: { path, content } });
const shell = (command: string) => ({ name: "shell", arguments: { command } });

it("the shape itself runs the user's git, as the test plants it: what the attacks below must not reach", () => {
  const planted = join(dir, "control");
  for (const sub of ["objects", "refs/heads"]) mkdirSync(join(planted, sub), { recursive: true });
  writeFileSync(join(planted, "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(planted, "config"), config());
  userGitStatus(planted);
  expect(existsSync(marker())).toBe(true);
});

it("write tools may not give a directory the third of HEAD, objects and refs, nor write in one that has them", async () => {
  await run(
    write("x/HEAD", "ref: refs/heads/main\n"),
    write("x/objects/keep", ""),
    write("x/refs/heads/keep", ""),
    write("x/config", config()),
  );
  expect(existsSync(join(dir, "ws/x/refs"))).toBe(false);
  userGitStatus(join(dir, "ws/x"));
  expect(existsSync(marker())).toBe(false);

  // One made whole another way (here by the test, as a clone would bring it): nothing written in it.
  const made = join(dir, "ws/y");
  for (const sub of ["objects", "refs/heads"]) mkdirSync(join(made, sub), { recursive: true });
  writeFileSync(join(made, "HEAD"), "ref: refs/heads/main\n");
  await run(write("y/config", config()), write("y/objects/../config", config()));
  expect(existsSync(join(made, "config"))).toBe(false);
});

it("objects and refs as symlinks make a repository all the same: the sandbox moves its HEAD aside, and write tools do not put one back", async () => {
  await run(
    shell(
      `mkdir -p store/objects store/refs/heads x && ln -s ../store/objects x/objects && ln -s ../store/refs x/refs && echo 'ref: refs/heads/main' > x/HEAD && printf '%s' '${config()}' > x/config`,
    ),
    write("x/HEAD", "ref: refs/heads/main\n"),
  );
  expect(readdirSync(join(dir, "ws/x")).some((name) => name.startsWith("HEAD.quarantined-"))).toBe(true);
  expect(existsSync(join(dir, "ws/x/HEAD"))).toBe(false);
  userGitStatus(join(dir, "ws/x"));
  expect(existsSync(marker())).toBe(false);
});

it("a repository under a directory whose name is not UTF-8 is found and moved aside too", async () => {
  await run(
    shell(
      `d=$(printf 'n\\377'); mkdir -p "$d/r/objects" "$d/r/refs/heads" && echo 'ref: refs/heads/main' > "$d/r/HEAD" && printf '%s' '${config()}' > "$d/r/config"`,
    ),
  );
  // Wherever it is now (left, or moved aside under a name Troupe can say), the user's git in it.
  const found = execFileSync(
    "sh",
    ["-c", 'for d in */r; do (cd "$d" && git status >/dev/null 2>&1); echo "$d"; done'],
    {
      cwd: join(dir, "ws"),
      env: { PATH: process.env.PATH, HOME: dir, GIT_CONFIG_NOSYSTEM: "1", GIT_CEILING_DIRECTORIES: dir },
    },
  );
  expect(found.length).toBeGreaterThan(0);
  expect(existsSync(marker())).toBe(false);
});

/* ATTACK (an outside review): a HEAD and a `commondir` file make a git dir too (a linked worktree's),
 * with objects, refs and config in the directory commondir names: git reads that config, and a
 * `core.pager` there ran at the user's `git branch` in the directory, planted by write tools or one
 * command under auto-edit. */
const pagerConfig = () => `[core]\n\tpager = "touch ${marker()}; cat"\n`;

/** The user's `git branch` on a terminal (the pager runs only there), in a directory of the workspace. */
function userGitBranch(at: string): void {
  try {
    execFileSync("script", ["-qc", "git branch", "/dev/null"], {
      cwd: at,
      stdio: "ignore",
      input: "",
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        TERM: "xterm",
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CEILING_DIRECTORIES: dir,
      },
    });
  } catch {}
}

function plantLinked(at: string): void {
  for (const sub of ["c/objects", "c/refs/heads"]) mkdirSync(join(at, sub), { recursive: true });
  writeFileSync(join(at, "HEAD"), "ref: refs/heads/main\n");
  writeFileSync(join(at, "commondir"), "c\n");
  writeFileSync(join(at, "c/config"), pagerConfig());
}

it("a HEAD with a commondir runs the user's git, as the test plants it: what the attacks below must not reach", () => {
  const planted = join(dir, "linked");
  plantLinked(planted);
  userGitBranch(planted);
  expect(existsSync(marker())).toBe(true);
});

it("write tools may not pair a HEAD with a commondir, nor write in a directory that has both", async () => {
  await run(
    write("x/HEAD", "ref: refs/heads/main\n"),
    write("x/commondir", "c\n"),
    write("x/c/objects/keep", ""),
    write("x/c/refs/heads/keep", ""),
    write("x/c/config", pagerConfig()),
  );
  expect(existsSync(join(dir, "ws/x/commondir"))).toBe(false);
  userGitBranch(join(dir, "ws/x"));
  expect(existsSync(marker())).toBe(false);

  plantLinked(join(dir, "ws/y"));
  await run(write("y/c/config", pagerConfig().replace("touch", "touch -c")), write("y/HEAD", "x\n"));
  expect(readdirSync(join(dir, "ws/y")).some((name) => name.startsWith("HEAD.quarantined-"))).toBe(false);
  expect(execFileSync("cat", [join(dir, "ws/y/HEAD")]).toString()).toBe("ref: refs/heads/main\n");
});

it("a HEAD with a commondir made by a command is moved aside by the sandbox", async () => {
  await run(
    shell(
      `mkdir -p y/c/objects y/c/refs/heads && echo 'ref: refs/heads/main' > y/HEAD && echo c > y/commondir && printf '%s' '${pagerConfig()}' > y/c/config`,
    ),
  );
  expect(readdirSync(join(dir, "ws/y")).some((name) => name.startsWith("HEAD.quarantined-"))).toBe(true);
  userGitBranch(join(dir, "ws/y"));
  expect(existsSync(marker())).toBe(false);
});
