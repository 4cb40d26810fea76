import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentHooks } from "../../src/actors/agent-hooks.js";
import { Runtime } from "../../src/actors/runtime.js";
import { freePort } from "../../src/bus/embedded-nats.js";
import { memoryLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { type HttpEverything, startEverything } from "../support/mcp-servers.js";

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
let servers: HttpEverything[] = [];
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "note.txt": "hi\n" }));
});
afterEach(async () => {
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
