import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { mcpServerSchema } from "../../src/config/mcp-server-schema.js";
import { memoryLogger } from "../../src/log.js";
import { detectSandbox } from "../../src/sandbox/sandbox.js";
import { mcpConfinement } from "../../src/sandbox/scope.js";
import { McpManager } from "../../src/tools/mcp/mcp-manager.js";
import { ToolRegistry } from "../../src/tools/tool.js";
import { tempTree } from "../support/cli.js";
import { runThroughPipeline } from "../support/pipeline.js";

/* A stdio MCP server whose entry says `sandbox:` runs under bubblewrap, like a shell command. */

const require = createRequire(import.meta.url);
const FILESYSTEM = join(
  dirname(require.resolve("@modelcontextprotocol/server-filesystem/package.json")),
  "dist",
  "index.js",
);
/** The server's code and its dependencies live in this checkout's node_modules, outside the workspace. */
const NODE_MODULES = resolve(
  dirname(require.resolve("@modelcontextprotocol/server-filesystem/package.json")),
  "../..",
);

let ws: string;
let dispose: () => void;
let manager: McpManager | undefined;
beforeEach(() => {
  let root: string;
  ({ dir: root, dispose } = tempTree({ "ws/hello.txt": "hello\n" }));
  ws = join(root, "ws");
});
afterEach(async () => {
  await manager?.close();
  dispose();
});

async function start(mode: "read-only" | "workspace-write"): Promise<ToolRegistry> {
  const registry = new ToolRegistry();
  const sandbox = detectSandbox();
  manager = new McpManager(
    { files: mcpServerSchema.parse({ command: process.execPath, args: [FILESYSTEM, ws], sandbox: mode }) },
    registry,
    {
      workspace: ws,
      log: memoryLogger().log,
      confine: mcpConfinement(
        sandbox,
        { workspace: ws, protectedDirs: [], hiddenDirs: [], readPaths: [NODE_MODULES] },
        false,
      ),
    },
  );
  await manager.start();
  expect(manager.state("files")).toBe("ready");
  return registry;
}

const call = (registry: ToolRegistry, name: string, args: Record<string, unknown>) =>
  runThroughPipeline(registry, ws, name, args);

it("read-only: the server reads the workspace, and its writes fail at the filesystem", async () => {
  const registry = await start("read-only");
  expect((await call(registry, "files__read_text_file", { path: join(ws, "hello.txt") })).content).toContain(
    "hello",
  );
  const wrote = await call(registry, "files__write_file", { path: join(ws, "new.txt"), content: "x" });
  expect(wrote.details.ok).toBe(false);
  expect(wrote.content).toMatch(/read-only file system/i);
  expect(existsSync(join(ws, "new.txt"))).toBe(false);
});

it("workspace-write: the server writes the workspace", async () => {
  const registry = await start("workspace-write");
  const wrote = await call(registry, "files__write_file", { path: join(ws, "new.txt"), content: "x" });
  expect(wrote.details.ok).toBe(true);
  expect(readFileSync(join(ws, "new.txt"), "utf8")).toBe("x");
});

it("an entry that asks for the sandbox where there is none does not start unconfined", async () => {
  const registry = new ToolRegistry();
  const memory = memoryLogger();
  manager = new McpManager(
    {
      files: mcpServerSchema.parse({
        command: process.execPath,
        args: [FILESYSTEM, ws],
        sandbox: "read-only",
      }),
    },
    registry,
    { workspace: ws, log: memory.log, restartDelayMs: 60_000 },
  );
  await manager.start();
  expect(manager.state("files")).toBe("down");
  expect(registry.names()).toEqual([]);
  expect(memory.records.some((r) => String(r.err).includes("asks for the sandbox"))).toBe(true);
});
