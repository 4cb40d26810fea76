import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { AgentHooks } from "../../src/actors/agent-hooks.js";
import { Runtime } from "../../src/actors/runtime.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/*
 * What a request says of its tools, as the server receives it over HTTP from the openai SDK: each
 * schema closed (additionalProperties: false), `strict` where troupe.yaml turns it on and the schema
 * fits, and the agent's toolChoice, or the one a hook gives for a turn.
 */

let server: ScriptedModelServer;
let workspace: string;
let dispose: () => void;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: workspace, dispose } = tempTree({ "notes.txt": "one\ntwo\n" }));
});
afterEach(async () => {
  await server.close();
  dispose();
});

async function runtime(agent: Record<string, unknown>, strictTools?: boolean, hooks?: AgentHooks) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      approval: { policy: "yolo" },
      providers: {
        openai: { baseURL: server.baseURL, models: { scripted: { strictTools } } },
      },
    },
    [{ name: "worker", description: "Works.", tools: ["read_file", "write_file"], ...agent }],
  );
  return new Runtime({
    config,
    workspace,
    env: {},
    tools: [],
    hooks,
    models: { retry: { baseDelayMs: 1 } },
  }).open();
}

const toolsOf = (at: number) => server.requests[at]?.body.tools ?? [];

describe("the tools a request carries", () => {
  it("closed schemas, strict where it is on and fits, and the agent's toolChoice naming a tool", async () => {
    server.script(
      { reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { reply: { text: "It says one, two." } },
    );
    const rt = await runtime({ toolChoice: "read_file" }, true);
    expect((await rt.start({ task: "Read notes.txt" }).done).reason).toBe("done");
    await rt.close();
    server.assertComplete();

    const tools = toolsOf(0);
    expect(tools.map((tool) => tool.function.name).sort()).toEqual(["read_file", "write_file"]);
    for (const tool of tools)
      expect(tool.function.parameters).toMatchObject({ type: "object", additionalProperties: false });
    // write_file requires each of its arguments; read_file's offset and limit are optional.
    const strict = Object.fromEntries(tools.map((tool) => [tool.function.name, tool.function.strict]));
    expect(strict).toEqual({ write_file: true, read_file: undefined });
    expect(server.requests[0]?.body.tool_choice).toEqual({
      type: "function",
      function: { name: "read_file" },
    });
  });

  it("no strict and no tool_choice unless asked for", async () => {
    server.script({ reply: { text: "Hi." } });
    const rt = await runtime({});
    await rt.start({ task: "Hi" }).done;
    await rt.close();
    expect(toolsOf(0).every((tool) => tool.function.strict === undefined)).toBe(true);
    expect(server.requests[0]?.body).not.toHaveProperty("tool_choice");
  });

  it("required on every turn that offers tools, until the budget's last turn, which offers none", async () => {
    server.script(
      {
        match: { withTools: true },
        reply: (request) => ({
          toolCalls: [
            { name: "read_file", arguments: { path: "notes.txt", offset: request.messages.length } },
          ],
        }),
        times: 3,
      },
      { match: { withTools: false }, reply: { text: "Out of turns." } },
    );
    const rt = await runtime({ toolChoice: "required", budget: { maxTurns: 3 } });
    const output = await rt.start({ task: "Keep reading" }).done;
    await rt.close();
    server.assertComplete();
    expect(output).toMatchObject({ reason: "budget_exhausted", result: "Out of turns.", turns: 4 });
    expect(server.requests.slice(0, 3).map((request) => request.body.tool_choice)).toEqual([
      "required",
      "required",
      "required",
    ]);
    expect(server.requests[3]?.body).not.toHaveProperty("tools");
    expect(server.requests[3]?.body).not.toHaveProperty("tool_choice");
  });

  it("a hook's toolChoice for one turn in place of the agent's", async () => {
    server.script(
      { reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] } },
      { reply: { text: "Done." } },
    );
    const rt = await runtime({ toolChoice: "required" }, false, {
      prepareNextTurn: ({ messages }) =>
        messages.some((m) => m.role === "tool") ? { toolChoice: "none" } : undefined,
    });
    await rt.start({ task: "Read once" }).done;
    await rt.close();
    expect(server.requests.map((request) => request.body.tool_choice)).toEqual(["required", "none"]);
  });
});
