// A small MCP server on the official SDK over stdio, whose tool list changes while it runs:
// calling `add_tool` registers `extra`, and the SDK tells clients with tools/list_changed.
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
await server.connect(new StdioServerTransport());
