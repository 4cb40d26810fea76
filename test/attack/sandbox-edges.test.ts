import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/* ATTACK: the edges of the workspace walk that decides what a sandboxed command may reach. A unix
 * socket inside .git was reachable from the read-only sandbox (the walk skipped .git, and a read-only
 * mount does not stop connect()); 2,100 nested directories made by the agent's own command made every
 * later command fail ("cannot look into …") until the user deleted them. */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({ "ws/app.js": "export const port = 80;\n" }));
  execFileSync("git", ["init", "-q", join(dir, "ws")]);
});
afterEach(async () => {
  await server.close();
  // GNU rm walks a tree of any depth (Node's rmSync stops at PATH_MAX).
  execFileSync("rm", ["-rf", dir]);
  dispose();
});

const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args });

/** Runs the calls, one turn each, under `policy`; the tool results the model got, in order. */
async function runTurns(policy: string, turns: Array<Array<ReturnType<typeof call>>>) {
  server.script(...turns.map((toolCalls, i) => ({ match: { turn: i + 1 }, reply: { toolCalls } })), {
    match: { turn: turns.length + 1 },
    reply: { text: "done" },
  });
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["shell", "write_file"] }],
  );
  const rt = await new Runtime({ config, workspace: join(dir, "ws"), env: {} }).open();
  try {
    await rt.start({ task: "go", approval: policy as "auto-edit" }).done;
  } finally {
    await rt.close();
  }
  return (server.requests.at(-1)?.body.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => String(m.content));
}

describe.each(["never-ask", "auto-edit"])("under %s", (policy) => {
  let listeners: Server[];
  let heard: string[];
  beforeEach(() => {
    listeners = [];
    heard = [];
  });
  afterEach(async () => {
    for (const listener of listeners) await new Promise((resolve) => listener.close(resolve));
  });

  const listen = (path: string) =>
    new Promise<void>((resolve) => {
      const listener = createServer((socket) => {
        heard.push(path);
        socket.destroy();
      });
      listeners.push(listener);
      listener.listen(path, resolve);
    });

  it("a listening unix socket inside .git (and deeper in it) cannot be connected to from a command", async () => {
    mkdirSync(join(dir, "ws/.git/sub"), { recursive: true });
    await listen(join(dir, "ws/.git/troupe.sock"));
    await listen(join(dir, "ws/.git/sub/deeper.sock"));
    await listen(join(dir, "ws/plain.sock"));
    const connect = (path: string) =>
      call("shell", {
        command: `node -e "require('net').connect('${path}').on('connect', () => { console.log('CONNECTED'); process.exit(0) }).on('error', (e) => { console.log('refused: ' + e.code); process.exit(0) })"`,
      });
    const results = await runTurns(policy, [
      [connect(".git/troupe.sock"), connect(".git/sub/deeper.sock"), connect("plain.sock")],
    ]);
    expect(results).toHaveLength(3);
    for (const result of results) {
      expect(result).toContain("refused:");
      expect(result).not.toContain("CONNECTED");
    }
    expect(heard).toEqual([]);
  });
});

it("2,100 nested directories made by a command: later commands and writes still run, and deep .git stays protected", async () => {
  const ws = join(dir, "ws");
  // A repository a few levels down, and one beyond the walk's bound (70 levels).
  execFileSync("git", ["init", "-q", join(ws, "a/b/c/d/e")]);
  const far = join(ws, "far", ...Array(70).fill("x"));
  mkdirSync(join(far, ".git"), { recursive: true });
  writeFileSync(join(far, ".git/config"), "[core]\n");
  const configs = [join(ws, ".git/config"), join(ws, "a/b/c/d/e/.git/config"), join(far, ".git/config")];
  const before = configs.map((file) => readFileSync(file, "utf8"));
  const farRelative = join("far", ...Array(70).fill("x"));
  const results = await runTurns("auto-edit", [
    [call("shell", { command: "mkdir -p \"$(printf 'd/%.0s' $(seq 2100))\" && echo made" })],
    [call("shell", { command: "echo still > elsewhere.txt && cat elsewhere.txt" })],
    [
      call("shell", {
        command: `for f in .git/config a/b/c/d/e/.git/config ${farRelative}/.git/config; do echo '[core] fsmonitor = touch pwned' >> $f; done; echo tried`,
      }),
    ],
    [call("write_file", { path: "notes.txt", content: "written\n" })],
  ]);
  const [made, still, tried, written] = results;
  expect(made).toContain("made");
  expect(still).not.toMatch(/^error:/);
  expect(still).toContain("still");
  expect(still).toContain("is hidden from commands");
  expect(tried).toContain("tried");
  expect(written).not.toMatch(/^error:/);
  expect(readFileSync(join(ws, "elsewhere.txt"), "utf8")).toBe("still\n");
  expect(readFileSync(join(ws, "notes.txt"), "utf8")).toBe("written\n");
  expect(configs.map((file) => readFileSync(file, "utf8"))).toEqual(before);
}, 120_000);
