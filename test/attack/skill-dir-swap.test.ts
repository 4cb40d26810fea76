import { mkdirSync, symlinkSync } from "node:fs";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/* ATTACK: a repository's own skill whose directory is a symbolic link into the workspace
 * (`.troupe/skills/kit -> ../../kit`). Once the skill is known, a sandboxed command (auto-edit, nobody
 * asked) swaps `kit` for a link to a directory outside the workspace: read_file's skill:kit/… and a
 * second load_skill must not read or list what is there. */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "outside/secret.txt": "the secret\n",
    "outside/SKILL.md": "---\nname: kit\ndescription: Outside.\n---\nthe outside body\n",
    "ws/kit/SKILL.md": "---\nname: kit\ndescription: The kit.\n---\nUse the kit.\n",
    "ws/kit/notes.md": "kit notes\n",
  }));
  mkdirSync(`${dir}/ws/.troupe/skills`, { recursive: true });
  symlinkSync("../../kit", `${dir}/ws/.troupe/skills/kit`);
});
afterEach(async () => {
  await server.close();
  dispose();
});

it("a workspace skill's linked directory swapped for a link outside: nothing there is read or listed", async () => {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["load_skill", "read_file", "shell"] }],
  );
  const rt = await new Runtime({ config, workspace: `${dir}/ws`, env: {} }).open();
  const call = (name: string, args: Record<string, unknown>) => ({ name, arguments: args });
  const turns = [
    [call("load_skill", { name: "kit" }), call("read_file", { path: "skill:kit/notes.md" })],
    [call("shell", { command: `mv kit kit.old && ln -s ${dir}/outside kit` })],
    [call("read_file", { path: "skill:kit/secret.txt" }), call("load_skill", { name: "kit" })],
  ];
  server.script(...turns.map((toolCalls, i) => ({ match: { turn: i + 1 }, reply: { toolCalls } })), {
    match: { turn: turns.length + 1 },
    reply: { text: "done" },
  });
  await rt.start({ task: "go", approval: "auto-edit" }).done;
  const results = (server.requests.at(-1)?.body.messages ?? [])
    .filter((m) => m.role === "tool")
    .map((m) => String(m.content));
  await rt.close();
  const [, notes, swapped, secret, again] = results;
  // Before the swap the skill's file is read; the swap itself ran (the sandbox cannot follow the link).
  expect(notes).toContain("kit notes");
  expect(swapped).not.toMatch(/^error:/);
  expect(secret).toMatch(/^error:/);
  expect(secret).not.toContain("the secret");
  expect(again).not.toContain("secret.txt");
  expect(again).not.toContain("the outside body");
});
