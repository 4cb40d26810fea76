import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { freePort } from "../../src/bus/embedded-nats.js";
import { mcpServerSchema } from "../../src/config/mcp-server-schema.js";
import { memoryLogger } from "../../src/log.js";
import { McpManager, McpToolCollisionError } from "../../src/tools/mcp/mcp-manager.js";
import { defineTool, type Tool, ToolRegistry } from "../../src/tools/tool.js";
import { tempTree } from "../support/cli.js";
import { EVERYTHING, FILESYSTEM, FIXTURE, startEverything } from "../support/mcp-servers.js";
import { runThroughPipeline } from "../support/pipeline.js";
import { waitFor } from "../support/wait.js";

let ws: string;
let root: string;
let dispose: () => void;
let managers: McpManager[] = [];
beforeEach(() => {
  ({ dir: root, dispose } = tempTree({
    "ws/hello.txt": "hello from the workspace\n",
    "outside.txt": "outside\n",
  }));
  ws = join(root, "ws");
});
afterEach(async () => {
  for (const manager of managers) await manager.close();
  managers = [];
  dispose();
});

function server(args: string[], extra: Record<string, unknown> = {}) {
  return mcpServerSchema.parse({ command: process.execPath, args, ...extra });
}

async function start(servers: Record<string, ReturnType<typeof server>>, registry = new ToolRegistry()) {
  const memory = memoryLogger();
  const manager = new McpManager(servers, registry, { workspace: ws, log: memory.log, restartDelayMs: 100 });
  managers.push(manager);
  await manager.start();
  return { manager, registry, logs: memory.records };
}

/** Runs one call through the whole pipeline, as an agent's batch would. */
const run = (registry: ToolRegistry, name: string, args: Record<string, unknown>) =>
  runThroughPipeline(registry, ws, name, args);

describe("MCP: @modelcontextprotocol/server-filesystem", () => {
  it("registers its tools as server__tool, reads and writes in the workspace, and the guard still applies", async () => {
    const { registry } = await start({ files: server([FILESYSTEM, ws]) });
    expect(registry.names()).toContain("files__read_text_file");
    expect(registry.get("files__read_text_file")?.effect).toBe("read");
    expect(registry.get("files__write_file")?.effect).toBe("execute");
    expect(registry.spec("files__read_text_file")?.parameters).toMatchObject({
      type: "object",
      properties: { path: { type: "string" } },
    });

    const read = await run(registry, "files__read_text_file", { path: join(ws, "hello.txt") });
    expect(read.details.ok).toBe(true);
    expect(read.content).toBe('<tool_output source="mcp:files">\nhello from the workspace\n\n</tool_output>');

    const wrote = await run(registry, "files__write_file", {
      path: join(ws, "new.txt"),
      content: "written over MCP",
    });
    expect(wrote.details.ok).toBe(true);
    expect(readFileSync(join(ws, "new.txt"), "utf8")).toBe("written over MCP");

    const outside = await run(registry, "files__write_file", {
      path: join(root, "outside.txt"),
      content: "pwned",
    });
    expect(outside).toMatchObject({
      details: { ok: false, error: expect.stringContaining("outside the workspace") },
    });
    expect(readFileSync(join(root, "outside.txt"), "utf8")).toBe("outside\n");
    const sneaky = await run(registry, "files__read_text_file", { path: "../outside.txt" });
    expect(sneaky.details.ok).toBe(false);
  });

  it("counts a server marked readOnly as read-only, whatever its tools say", async () => {
    const { registry } = await start({ files: server([FILESYSTEM, ws], { readOnly: true }) });
    expect(registry.get("files__write_file")?.effect).toBe("read");
  });
});

describe("MCP: @modelcontextprotocol/server-everything", () => {
  it("passes arguments and results, and reports a tool's error as an error result", async () => {
    const { registry } = await start({ everything: server([EVERYTHING]) });
    const sum = await run(registry, "everything__get-sum", { a: 2, b: 3 });
    expect(sum.details.ok).toBe(true);
    expect(sum.content).toContain("5");
    const bad = await run(registry, "everything__get-sum", { a: "two", b: 3 });
    expect(bad.details.ok).toBe(false);
    expect(bad.details.error).toMatch(/everything|invalid|expected/i);
  });

  it("caps a large output with a note", async () => {
    const { registry } = await start({ everything: server([EVERYTHING]) });
    const big = await run(registry, "everything__echo", { message: "x".repeat(100_000) });
    expect(big.details.ok).toBe(true);
    expect(big.content.length).toBeLessThan(31_000);
    expect(big.content).toMatch(/characters omitted of \d+/);
  });

  it("fails a slow tool at the server's call timeout", async () => {
    const { registry } = await start({ everything: server([EVERYTHING], { timeoutMs: 500 }) });
    const started = Date.now();
    const slow = await run(registry, "everything__trigger-long-running-operation", {
      duration: 10,
      steps: 5,
    });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(slow).toMatchObject({
      details: {
        ok: false,
        error: "everything: trigger-long-running-operation timed out after 500 ms",
      },
    });
  });

  it("a slow tool that reports progress outlives its call timeout, each report starting it again; observers hear of it", async () => {
    const { registry } = await start({ everything: server([EVERYTHING], { timeoutMs: 3000 }) });
    const progress: Array<{ progress: number; total?: number | undefined }> = [];
    // 9 s in 9 steps: past the server's call timeout (3 s) and the pipeline's backstop (8 s).
    const slow = await runThroughPipeline(
      registry,
      ws,
      "everything__trigger-long-running-operation",
      { duration: 9, steps: 9 },
      { onProgress: (_call, update) => progress.push(update) },
    );
    expect(slow).toMatchObject({ details: { ok: true } });
    expect(slow.content).toContain("Long running operation completed. Duration: 9 seconds, Steps: 9.");
    // The SDK hands a notification on a tick later than the answer that follows it: the last report
    // (9 of 9), sent just before the answer, may come after the call ended and is then dropped.
    expect(progress.slice(0, 8)).toEqual(
      [1, 2, 3, 4, 5, 6, 7, 8].map((step) => ({ progress: step, total: 9 })),
    );
  }, 20_000);

  it("fails a tool that keeps reporting progress at the server's maxTotalTimeoutMs", async () => {
    const { registry } = await start({
      everything: server([EVERYTHING], { timeoutMs: 1500, maxTotalTimeoutMs: 2500 }),
    });
    const started = Date.now();
    const slow = await run(registry, "everything__trigger-long-running-operation", {
      duration: 10,
      steps: 10,
    });
    expect(Date.now() - started).toBeLessThan(4000);
    expect(slow).toMatchObject({
      details: {
        ok: false,
        error: "everything: trigger-long-running-operation timed out after 2500 ms in all",
      },
    });
  });

  it("passes resource links with their uri, name and description, embedded resources named, and images as a line with type and size", async () => {
    const { registry } = await start({ everything: server([EVERYTHING]) });
    const links = await run(registry, "everything__get-resource-links", { count: 2 });
    expect(links.details.ok).toBe(true);
    expect(links.content).toContain(
      '[resource link "Blob Resource 1": demo://resource/dynamic/blob/1 (text/plain; Resource 1: plaintext resource)]',
    );
    expect(links.content).toContain(
      '[resource link "Text Resource 2": demo://resource/dynamic/text/2 (text/plain; Resource 2: plaintext resource)]',
    );
    const image = await run(registry, "everything__get-tiny-image", {});
    expect(image.content).toMatch(
      /Here's the image you requested:\n\[image: image\/png, \d+(\.\d)? (bytes|KB); shown to a model that takes images, after the results\]\nThe image above is the MCP logo\./,
    );
    // resourceType is no path argument: it reaches the server as it is.
    const text = await run(registry, "everything__get-resource-reference", {
      resourceType: "Text",
      resourceId: 2,
    });
    expect(text.content).toMatch(
      /\[resource demo:\/\/resource\/dynamic\/text\/2 \(text\/plain\)\]\nResource 2: This is a plaintext resource created at /,
    );
  });

  it("does not offer a tool that requires task-based execution, and a call of it says why", async () => {
    const { registry, logs } = await start({ everything: server([EVERYTHING]) });
    await waitFor("its conditional tools", () => registry.names().includes("everything__get-roots-list"));
    expect(registry.names()).not.toContain("everything__simulate-research-query");
    const call = await run(registry, "everything__simulate-research-query", { topic: "x" });
    expect(call.details.error).toBe(
      'MCP tool "everything__simulate-research-query" is not offered: it requires task-based execution, which troupe does not support',
    );
    expect(logs).toContainEqual(
      expect.objectContaining({
        tool: "everything__simulate-research-query",
        msg: "MCP tool not offered: it requires task-based execution, which troupe does not support",
      }),
    );
  });

  it("refreshes its tools when the server says the list changed, keeping every tool callable", async () => {
    const registry = new ToolRegistry();
    const replaced = vi.spyOn(registry, "replace");
    const { logs } = await start({ everything: server([EVERYTHING]) }, registry);
    // The server registers its client-dependent tools after initialization and announces it.
    await waitFor(
      "a refresh after tools/list_changed",
      () => logs.filter((r) => r.msg === "registered MCP tools").length >= 2,
    );
    // Its first tools/list answer already holds those tools, so the list after the refresh looks the
    // same: that each listing (the first, then every refresh) put its tools into the registry is seen
    // in the registry's writes.
    const listings = logs.filter((r) => r.msg === "registered MCP tools").length;
    const registrations = (name: string) => replaced.mock.calls.filter(([tool]) => tool.name === name).length;
    expect(registrations("everything__get-roots-list")).toBe(listings);
    expect(registrations("everything__echo")).toBe(listings);
    const names = registry.names();
    expect(names).toEqual(
      expect.arrayContaining(["everything__echo", "everything__get-sum", "everything__get-roots-list"]),
    );
    expect(new Set(names).size).toBe(names.length);
    expect(registry.get("everything__get-roots-list")?.effect).toBe("read");
    expect((await run(registry, "everything__get-sum", { a: 2, b: 3 })).content).toContain("5");
  });

  it("restarts a server that was killed, failing its calls clearly meanwhile", async () => {
    const { manager, registry } = await start({ everything: server([EVERYTHING]) });
    const pid = manager.pid("everything");
    expect(pid).toBeGreaterThan(0);
    process.kill(pid as number, "SIGKILL");
    await waitFor("the server to be seen down", () => manager.state("everything") !== "ready");
    const during = await run(registry, "everything__get-sum", { a: 1, b: 1 });
    expect(during).toMatchObject({
      details: {
        ok: false,
        error: expect.stringMatching(
          /^MCP server "everything" is not running: it exited; (retrying in \d+ s|starting it now)$/,
        ),
      },
    });
    await waitFor("the restart", () => manager.state("everything") === "ready", 15_000);
    expect(manager.pid("everything")).not.toBe(pid);
    expect((await run(registry, "everything__get-sum", { a: 1, b: 1 })).details.ok).toBe(true);
  });
});

describe("MCP over Streamable HTTP", () => {
  it("connects to a server by url, as the `url` entries of troupe.yaml do", async () => {
    const port = await freePort();
    const server = await startEverything("streamableHttp", port);
    try {
      const { registry } = await start({
        remote: mcpServerSchema.parse({ url: `http://127.0.0.1:${port}/mcp` }),
      });
      const sum = await run(registry, "remote__get-sum", { a: 20, b: 22 });
      expect(sum.details.ok).toBe(true);
      expect(sum.content).toContain("42");
    } finally {
      await server.kill();
    }
  });
});

describe("MCP: tool lists", () => {
  it("adds a tool that appears while the server runs", async () => {
    const { registry } = await start({ fixture: server([FIXTURE]) });
    expect(registry.get("fixture__extra")).toBeUndefined();
    expect((await run(registry, "fixture__add_tool", {})).details.ok).toBe(true);
    await waitFor("the new tool", () => registry.get("fixture__extra") !== undefined);
    expect((await run(registry, "fixture__extra", { n: 7 })).content).toContain("extra 7");
  });

  it("refuses to start when a tool name collides", async () => {
    const registry = new ToolRegistry([
      defineTool({
        name: "fixture__add_tool",
        description: "A clash.",
        effect: "read",
        parameters: z.object({}),
        execute: () => ({ ok: true, output: "" }),
      }) as Tool,
    ]);
    const manager = new McpManager({ fixture: server([FIXTURE]) }, registry, { workspace: ws });
    managers.push(manager);
    await expect(manager.start()).rejects.toBeInstanceOf(McpToolCollisionError);
    expect(existsSync(ws)).toBe(true);
  });
});

describe("MCP: a stdio server's stderr", () => {
  it("goes to the log, line by line, with the server's name: at start and while it serves, cleaned and cut", async () => {
    const long = "x".repeat(5000);
    const { registry, logs } = await start({
      fixture: server([FIXTURE], {
        env: { FIXTURE_STDERR: `\x1b[31mred\x1b[0m warning\x07\n\x1b]0;new title\x07plain\n${long}\n` },
      }),
    });
    expect((await run(registry, "fixture__fail", { message: "no \x1b[2Jsuch row" })).details.ok).toBe(false);
    const said = () =>
      logs.filter((r) => r.server === "fixture" && r.stream === "stderr" && r.component === "mcp");
    await waitFor("the server's stderr in the log", () => said().some((r) => r.msg === "fail: no such row"));
    const lines = said();
    expect(lines.every((r) => r.level === 30)).toBe(true);
    expect(lines.map((r) => r.msg)).toEqual([
      "red warning",
      "plain",
      `${"x".repeat(2000)}…`,
      "fail: no such row",
    ]);
  });
});
