import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { loadConfig } from "../../src/config/load.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";

/* ATTACK: other files troupe loads at start, in the workspace, that a sandboxed command (auto-edit,
 * nobody asked) could change: an agentsDir outside the config dir. (What a protected tool module
 * imports is not protected: docs/tools-and-safety.md says so.) */

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({}));
});
afterEach(async () => {
  await server.close();
  dispose();
});

const head = () =>
  `defaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${server.baseURL}\n    models: { scripted: {} }\n`;

async function run(command: string) {
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "shell", arguments: { command } }] } },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  const config = loadConfig({ config: join(dir, "config"), env: {} });
  const runtime = await new Runtime({ config, workspace: join(dir, "ws"), env: {} }).open();
  await runtime.start({ task: "x", approval: "auto-edit" }).done;
  const out = server.requests
    .at(-1)
    ?.body.messages.filter((m) => m.role === "tool")
    .map((m) => String(m.content));
  await runtime.close();
  return out;
}

it("agentsDir inside the workspace: a command cannot turn its own agent to yolo", async () => {
  mkdirSync(join(dir, "config"), { recursive: true });
  mkdirSync(join(dir, "ws/agents"), { recursive: true });
  writeFileSync(join(dir, "config/troupe.yaml"), `${head()}agentsDir: ../ws/agents\n`);
  writeFileSync(
    join(dir, "ws/agents/coder.yaml"),
    "name: coder\ndescription: Codes.\ntools: [write_file, shell]\n",
  );
  await run("echo 'approval: yolo' >> agents/coder.yaml");
  const next = loadConfig({ config: join(dir, "config"), env: {} });
  expect(next.agents.get("coder")?.definition.approval).toBeUndefined();
});
