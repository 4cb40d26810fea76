import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { PLAN_NOTE } from "../../src/actors/agent-stream.js";
import { Runtime } from "../../src/actors/runtime.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "app.js": "const port = 80;\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(agent: Record<string, unknown> = {}) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      plan: { maxTurns: 3 },
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [
      {
        name: "coder",
        description: "Codes.",
        tools: ["read_file", "write_file", "shell"],
        budget: { maxTurns: 20 },
        ...agent,
      },
    ],
  );
  return new Runtime({ config, workspace: ws, env: {} }).open();
}

it("plan mode: write tools are gone and refused when called anyway, the shell runs read-only, the file is untouched, the turns are capped", async () => {
  server.script(
    {
      match: { turn: 1 },
      reply: {
        toolCalls: [
          { name: "write_file", arguments: { path: "app.js", content: "hacked" } },
          { name: "read_file", arguments: { path: "app.js" } },
          { name: "shell", arguments: { command: "echo hacked > app.js; touch hacked" } },
        ],
      },
    },
    {
      match: { withTools: true },
      reply: { toolCalls: [{ name: "read_file", arguments: { path: "app.js" } }] },
      times: 5,
    },
    {
      match: { withTools: false },
      reply: { text: "Plan: change port to 8080 in app.js, then run the tests." },
    },
  );
  const rt = await runtime();
  const output = await rt.start({ task: "Make the port configurable", mode: "plan", approval: "yolo" }).done;
  const first = server.requests[0]?.body;
  expect(first?.tools?.map((t) => t.function.name)).toEqual(["read_file", "shell"]);
  expect(first?.messages[0]?.content).toContain(PLAN_NOTE);
  const refused =
    server.requests[1]?.body.messages.filter((m) => m.role === "tool").map((m) => m.content) ?? [];
  expect(refused[0]).toContain("write_file writes, and this agent is in plan mode");
  // Even under yolo, a planning agent's shell runs in the read-only sandbox.
  expect(refused[2]).toContain("Read-only file system");
  expect(readFileSync(join(ws, "app.js"), "utf8")).toBe("const port = 80;\n");
  expect(existsSync(join(ws, "hacked"))).toBe(false);
  // At most 3 turns, then the last one without tools.
  expect(output).toMatchObject({
    reason: "budget_exhausted",
    turns: 4,
    result: "Plan: change port to 8080 in app.js, then run the tests.",
  });
  await rt.close();
});

it("plan mode from the agent's YAML, and act mode left alone", async () => {
  server.script({ reply: { text: "planned" } }, { reply: { text: "acted" } });
  const planner = await runtime({ mode: "plan" });
  await planner.start({ task: "x" }).done;
  expect(server.requests[0]?.body.tools?.map((t) => t.function.name)).toEqual(["read_file", "shell"]);
  await planner.close();
  const actor = await runtime();
  await actor.start({ task: "x" }).done;
  expect(server.requests[1]?.body.tools?.map((t) => t.function.name)).toEqual([
    "read_file",
    "write_file",
    "shell",
  ]);
  await actor.close();
});
