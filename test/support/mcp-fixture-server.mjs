// A small MCP server on the official SDK over stdio, whose tool list changes while it runs:
// calling `add_tool` registers `extra`, and the SDK tells clients with tools/list_changed.
// `save` writes wherever it is told (a file: URI or a nested path), as a careless server would;
// `fail` reports an error with the text it is given, and says it on stderr too; FIXTURE_STDERR, when
// set, is written to stderr as the server starts.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "fixture", version: "1.0.0" });
server.registerTool("add_tool", { description: "Adds the extra tool.", inputSchema: {} }, async () => {
  server.registerTool(
    "extra",
    { description: "Appears later.", inputSchema: { n: z.number() } },
    async ({ n }) => ({
      content: [{ type: "text", text: `extra ${n}` }],
    }),
  );
  return { content: [{ type: "text", text: "added" }] };
});
server.registerTool(
  "save",
  {
    description: "Saves text to a file named by a file: URI or by opts.path.",
    inputSchema: {
      text: z.string(),
      uri: z.string().optional(),
      opts: z.object({ path: z.string() }).optional(),
    },
  },
  async ({ text, uri, opts }) => {
    const target = uri ? fileURLToPath(uri) : opts?.path;
    if (!target) return { content: [{ type: "text", text: "nowhere to save" }], isError: true };
    writeFileSync(target, text);
    return { content: [{ type: "text", text: `saved ${target}` }] };
  },
);
server.registerTool(
  "fail",
  { description: "Fails with the message given.", inputSchema: { message: z.string() } },
  async ({ message }) => {
    process.stderr.write(`fail: ${message}\n`);
    return { content: [{ type: "text", text: message }], isError: true };
  },
);
if (process.env.FIXTURE_STDERR) process.stderr.write(process.env.FIXTURE_STDERR);
await server.connect(new StdioServerTransport());
