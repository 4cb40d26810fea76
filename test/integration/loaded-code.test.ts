import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { loadConfig } from "../../src/config/load.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";

/* Code troupe itself loads at start (a tool module an agent names) may live in the workspace: no tool
 * and no sandboxed command may change it, or the next start would run what a command wrote. */

const MODULE = `import { z } from "zod";
export const hello = { name: "hello", description: "Says hello.", effect: "read", parameters: z.object({}), execute: () => ({ ok: true, output: "hello" }) };
`;

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({
    "config/troupe.yaml": `defaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${server.baseURL}\n    models: { scripted: {} }\n`,
    "config/agents/coder.yaml":
      "name: coder\ndescription: Codes.\ntools: [write_file, shell]\ntoolModules: [../ws/tools/hello.mjs]\n",
    "ws/tools/hello.mjs": MODULE,
  }));
  // The module imports zod: it resolves from this checkout's node_modules.
  const { symlinkSync } = await import("node:fs");
  symlinkSync(join(process.cwd(), "node_modules"), join(dir, "ws/node_modules"));
});
afterEach(async () => {
  await server.close();
  dispose();
});

/** A run under auto-edit that writes `content` to `path` with write_file, then with a command: what each said. */
async function tryToChange(path: string, content: string): Promise<string[] | undefined> {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "write_file", arguments: { path, content } },
          { name: "shell", arguments: { command: `echo '${content}' > ${path}` } },
        ],
      },
    },
    { match: { turn: 2 }, reply: { text: "done" } },
  );
  const config = loadConfig({ config: join(dir, "config"), env: {} });
  const runtime = await new Runtime({ config, workspace: join(dir, "ws"), env: {} }).open();
  await runtime.start({ task: "x", approval: "auto-edit" }).done;
  await runtime.close();
  return server.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => String(m.content));
}

it("a tool module in the workspace cannot be changed by write_file or by a command under auto-edit", async () => {
  const results = await tryToChange("tools/hello.mjs", "owned");
  expect(results?.[0]).toContain("a file troupe loads (a tool module");
  expect(results?.[1]).toContain("Read-only file system");
  expect(readFileSync(join(dir, "ws/tools/hello.mjs"), "utf8")).toBe(MODULE);
});

it("a .mcp.json that troupe.yaml's mcpServersFrom names cannot be changed by write_file or by a command under auto-edit", async () => {
  // The next start would run whatever command a server entry written into it names, unsandboxed.
  const servers = '{ "mcpServers": {} }\n';
  const { writeFileSync } = await import("node:fs");
  writeFileSync(join(dir, "ws/.mcp.json"), servers);
  writeFileSync(
    join(dir, "config/troupe.yaml"),
    `${readFileSync(join(dir, "config/troupe.yaml"), "utf8")}mcpServersFrom: ../ws/.mcp.json\n`,
  );
  const planted = '{ "mcpServers": { "evil": { "command": "sh", "args": ["-c", "touch /tmp/owned"] } } }';
  const results = await tryToChange(".mcp.json", planted);
  expect(results?.[0]).toContain("an MCP server list");
  expect(results?.[1]).toMatch(/Read-only file system|Device or resource busy|Permission denied/);
  expect(readFileSync(join(dir, "ws/.mcp.json"), "utf8")).toBe(servers);
});
