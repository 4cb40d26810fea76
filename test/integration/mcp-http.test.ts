import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentHooks } from "../../src/actors/agent-hooks.js";
import { Runtime } from "../../src/actors/runtime.js";
import { freePort } from "../../src/bus/embedded-nats.js";
import { mcpServerSchema } from "../../src/config/mcp-server-schema.js";
import { memoryLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { McpManager } from "../../src/tools/mcp/mcp-manager.js";
import { ToolRegistry } from "../../src/tools/tool.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { type HttpEverything, startEverything } from "../support/mcp-servers.js";
import { runThroughPipeline } from "../support/pipeline.js";
import { waitFor } from "../support/wait.js";

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
let servers: HttpEverything[] = [];
let managers: McpManager[] = [];
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "note.txt": "hi\n" }));
});
afterEach(async () => {
  for (const manager of managers) await manager.close();
  managers = [];
  for (const server of servers)
    if (server.child.exitCode === null && !server.child.signalCode) await server.kill();
  servers = [];
  await model.close();
  dispose();
});

async function everything(mode: "streamableHttp" | "sse", port: number) {
  const server = await startEverything(mode, port);
  servers.push(server);
  return server;
}

function runtime(url: string, hooks: AgentHooks = {}) {
  const memory = memoryLogger();
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
      mcpServers: { everything: { url } },
    },
    [{ name: "adder", description: "Adds.", tools: ["everything__get-sum"] }],
  );
  return {
    rt: new Runtime({ config, workspace: ws, env: {}, hooks, log: memory.log }),
    logs: memory.records,
  };
}

const sum = (a: number, b: number) => ({ toolCalls: [{ name: "everything__get-sum", arguments: { a, b } }] });
const toolMessages = () =>
  (model.requests.at(-1)?.body.messages ?? []).filter((m) => m.role === "tool").map((m) => String(m.content));

describe("MCP over Streamable HTTP", () => {
  it("a server killed and restarted mid-run: the next call starts a new session and succeeds, and says so in the log", async () => {
    const port = await freePort();
    let server = await everything("streamableHttp", port);
    model.script(
      { match: { turn: 1 }, reply: sum(1, 2) },
      { match: { turn: 2 }, reply: sum(2, 3) },
      { match: { turn: 3 }, reply: { text: "5" } },
    );
    let calls = 0;
    const { rt, logs } = runtime(`http://127.0.0.1:${port}/mcp`, {
      // Just before the second call, the server is killed and started again.
      beforeToolCall: async () => {
        if (++calls === 2) {
          await server.kill();
          server = await everything("streamableHttp", port);
        }
        return undefined;
      },
    });
    await rt.open();
    try {
      const output = await rt.start({ task: "Add" }).done;
      expect(output.reason).toBe("done");
      expect(calls).toBe(2);
      expect(toolMessages()).toEqual([
        expect.stringContaining("The sum of 1 and 2 is 3."),
        expect.stringContaining("The sum of 2 and 3 is 5."),
      ]);
      expect(logs.map((r) => r.msg)).toContain(
        "the MCP server no longer knows this session (it restarted?); starting a new session",
      );
    } finally {
      await rt.close();
    }
  });
});

/** A manager of one server at `url`, started; its log records. */
async function manage(url: string, entry: Record<string, unknown> = {}) {
  const memory = memoryLogger();
  const registry = new ToolRegistry();
  const manager = new McpManager({ remote: mcpServerSchema.parse({ url, ...entry }) }, registry, {
    workspace: ws,
    log: memory.log,
    restartDelayMs: 60_000,
    startTimeoutMs: 5000,
  });
  managers.push(manager);
  await manager.start();
  return { manager, registry, logs: memory.records };
}

describe("MCP over the legacy HTTP+SSE transport", () => {
  it("a server that refuses Streamable HTTP is reached over SSE, and the log says which transport was used", async () => {
    const port = await freePort();
    await everything("sse", port);
    const url = `http://127.0.0.1:${port}/sse`;
    const { manager, registry, logs } = await manage(url);
    expect(manager.state("remote")).toBe("ready");
    const sum = await runThroughPipeline(registry, ws, "remote__get-sum", { a: 20, b: 22 });
    expect(sum).toMatchObject({
      details: { ok: true },
      content: expect.stringContaining("The sum of 20 and 22 is 42."),
    });
    expect(logs).toContainEqual(
      expect.objectContaining({
        transport: "sse",
        msg: `${url} refused Streamable HTTP (HTTP 404): connected over the legacy HTTP+SSE transport`,
      }),
    );
    expect(logs).toContainEqual(expect.objectContaining({ msg: "MCP server ready", transport: "sse" }));
  });

  it("type: sse (Claude Code, VS Code) goes to the legacy transport without trying Streamable HTTP first", async () => {
    const port = await freePort();
    await everything("sse", port);
    const { manager, logs } = await manage(`http://127.0.0.1:${port}/sse`, { type: "sse" });
    expect(manager.state("remote")).toBe("ready");
    expect(logs).toContainEqual(expect.objectContaining({ msg: "MCP server ready", transport: "sse" }));
    expect(logs.filter((r) => String(r.msg).includes("refused Streamable HTTP"))).toEqual([]);
  });

  it("a url that answers neither says so in one line, without the server's HTML page", async () => {
    const port = await freePort();
    await everything("streamableHttp", port);
    const url = `http://127.0.0.1:${port}/nothing`;
    const { manager, logs } = await manage(url);
    expect(manager.state("remote")).toBe("down");
    const failure = logs.find((r) => String(r.msg).startsWith("MCP server did not start: "));
    expect(failure?.err).toMatch(
      new RegExp(
        `^${url} answers neither Streamable HTTP \\(HTTP 404\\) nor the legacy HTTP\\+SSE transport \\(.*404.*\\); check the url$`,
      ),
    );
    expect(JSON.stringify(logs)).not.toContain("<");
  });

  it("a url that answers with a web page says so, in one line", async () => {
    const page = createServer((_request, response) => {
      response.writeHead(200, { "content-type": "text/html" });
      response.end("<html><body>Welcome</body></html>");
    });
    await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(page.address() as AddressInfo).port}/`;
      const { manager, logs } = await manage(url);
      expect(manager.state("remote")).toBe("down");
      const failure = logs.find((r) => String(r.msg).startsWith("MCP server did not start: "));
      expect(failure?.err).toMatch(
        /^http:\/\/127\.0\.0\.1:\d+\/ answers neither Streamable HTTP \(it answered text\/html, not JSON\) nor the legacy HTTP\+SSE transport \(.*\); check the url$/,
      );
      expect(JSON.stringify(logs)).not.toContain("Welcome");
    } finally {
      page.closeAllConnections();
      await new Promise((resolve) => page.close(resolve));
    }
  });

  it("a server restarted: its broken event stream is seen at once, a call meanwhile says which url and that it is retried, and the first call after goes through", async () => {
    const port = await freePort();
    let server = await everything("sse", port);
    const url = `http://127.0.0.1:${port}/sse`;
    // Backoff of a minute: only a call tries it again, as soon as it comes.
    const { manager, registry, logs } = await manage(url, { type: "sse", timeoutMs: 30_000 });
    const add = () => runThroughPipeline(registry, ws, "remote__get-sum", { a: 20, b: 22 });
    expect((await add()).details.ok).toBe(true);
    await server.kill();
    await waitFor("the broken stream seen", () => manager.state("remote") === "down");
    expect(logs).toContainEqual(
      expect.objectContaining({
        msg: expect.stringMatching(
          new RegExp(`^the MCP server's event stream broke: the event stream of ${url} broke \\(`),
        ),
      }),
    );
    const down = await add();
    expect(down.details.error).toMatch(
      new RegExp(
        `^MCP server "remote" is not running: ${url} is not reachable \\(ECONNREFUSED\\); retrying in \\d+ s$`,
      ),
    );
    server = await everything("sse", port);
    const started = Date.now();
    const back = await add();
    expect(back).toMatchObject({
      details: { ok: true },
      content: expect.stringContaining("The sum of 20 and 22 is 42."),
    });
    expect(Date.now() - started).toBeLessThan(5000);
  }, 30_000);
});

describe("MCP over Streamable HTTP, its server down", () => {
  it("a call says which server, its url, and that it is retried", async () => {
    const port = await freePort();
    const server = await everything("streamableHttp", port);
    const url = `http://127.0.0.1:${port}/mcp`;
    const { registry } = await manage(url);
    await server.kill();
    const down = await runThroughPipeline(registry, ws, "remote__get-sum", { a: 1, b: 2 });
    expect(down.details.error).toMatch(
      new RegExp(
        `^MCP server "remote" is not running: ${url} is not reachable \\(ECONNREFUSED\\); retrying in \\d+ s$`,
      ),
    );
  });
});
