// A small MCP server on the official SDK over stdio, whose tool list changes while it runs:
// calling `add_tool` registers `extra`, and the SDK tells clients with tools/list_changed.
// `save` writes wherever it is told (a file: URI or a nested path), as a careless server would;
// `append` appends a line to a file and then holds its answer back `holdMs` (a call that has taken
// effect and is still running, for a host to die in); `fail` reports an error with the text it is
// given, and says it on stderr too; FIXTURE_STDERR, when set, is written to stderr as the server starts.
import { appendFileSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
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
  "append",
  {
    description: "Appends a line to a file, then answers after holdMs.",
    inputSchema: { path: z.string(), line: z.string(), holdMs: z.number().optional() },
  },
  async ({ path, line, holdMs }) => {
    appendFileSync(path, `${line}\n`);
    await sleep(holdMs ?? 0);
    return { content: [{ type: "text", text: `appended ${line}` }] };
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
