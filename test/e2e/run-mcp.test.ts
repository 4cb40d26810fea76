import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { runTroupe, tempTree } from "../support/cli.js";

const require = createRequire(import.meta.url);
const FILESYSTEM = join(
  dirname(require.resolve("@modelcontextprotocol/server-filesystem/package.json")),
  "dist",
  "index.js",
);

let server: ScriptedModelServer;
let dir: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir, dispose } = tempTree({ "ws/hello.txt": "hello over MCP\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

it("troupe run uses the MCP servers of troupe.yaml, pasted in the Claude Desktop shape", async () => {
  const troupeYaml = [
    "defaultAgent: reader",
    "defaultModel: scripted",
    "mcpServers:",
    "  files:",
    `    command: ${JSON.stringify(process.execPath)}`,
    `    args: [${JSON.stringify(FILESYSTEM)}, ${JSON.stringify(join(dir, "ws"))}]`,
    "",
  ].join("\n");
  const files = tempTree(
    {
      "config/troupe.yaml": troupeYaml,
      "config/agents/reader.yaml": "name: reader\ndescription: Reads.\ntools: [files__*]\n",
    },
    { trusted: true },
  );
  try {
    server.script(
      {
        match: { turn: 1 },
        reply: {
          toolCalls: [{ name: "files__read_text_file", arguments: { path: join(dir, "ws", "hello.txt") } }],
        },
      },
      { match: { turn: 2 }, reply: { text: "It says hello." } },
    );
    const result = await runTroupe(["run", "--local", "-w", join(dir, "ws"), "Read hello.txt"], {
      cwd: files.dir,
      env: { OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" },
    });
    expect(result.stderr).toMatch(/✓ done · 2 turns · 1 tool call · /);
    expect(result.code).toBe(0);
    expect(server.requests[0]?.body.tools?.map((t) => t.function.name)).toContain("files__read_text_file");
    const toolResult = server.requests[1]?.body.messages.find((m) => m.role === "tool");
    expect(toolResult?.content).toBe('<tool_output source="mcp:files">\nhello over MCP\n\n</tool_output>');
  } finally {
    files.dispose();
  }
});
