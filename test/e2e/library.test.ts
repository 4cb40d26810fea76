import { spawn } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { z } from "zod";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { createRuntime, defineTool } from "../../src/index.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
let server: ScriptedModelServer;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
});
afterEach(async () => {
  await server.close();
});

describe("the library API", () => {
  it("runs the example in examples/: a tool in code, hooks as functions, typed events", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "weather", arguments: { city: "Lisbon" } }] } },
      { match: { turn: 2 }, reply: { text: "It is sunny in Lisbon." } },
    );
    const child = spawn(process.execPath, [join(ROOT, "examples/library.mjs")], {
      cwd: ROOT,
      env: {
        ...process.env,
        OPENAI_BASE_URL: server.baseURL,
        OPENAI_API_KEY: "",
        TROUPE_EXAMPLE_MODEL: "scripted",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    const code = await new Promise((resolve) => child.once("exit", resolve));
    expect(code).toBe(0);
    expect(stdout).toBe('tool: weather {"city":"Lisbon"}\nIt is sunny in Lisbon.\nstopped: done, 2 turns\n');
    // The hooks changed the arguments and the result the model saw.
    expect(server.requests[1]?.body.messages.find((m) => m.role === "tool")?.content).toContain(
      "Sunny and 21°C in LISBON (checked by a hook)",
    );
  });

  it("blocks a call from beforeToolCall, stops after a turn, and swaps the model with prepareNextTurn", async () => {
    server.script(
      {
        match: { where: (r) => r.model === "first", turn: 1 },
        reply: { toolCalls: [{ name: "weather", arguments: { city: "Atlantis" } }] },
      },
      {
        match: { where: (r) => r.model === "second", turn: 2 },
        reply: { toolCalls: [{ name: "weather", arguments: { city: "Oslo" } }] },
      },
    );
    const weather = defineTool({
      name: "weather",
      description: "Weather.",
      effect: "read",
      parameters: z.object({ city: z.string() }),
      execute: ({ city }) => ({ ok: true, output: `rain in ${city}` }),
    });
    const runtime = await createRuntime({
      settings: {
        defaultModel: "first",
        providers: { openai: { baseURL: server.baseURL, models: { first: {}, second: {} } } },
      },
      agents: [{ name: "a", description: "A.", tools: ["weather"] }],
      tools: [weather],
      env: {},
      hooks: {
        beforeToolCall: ({ args }) =>
          (args as { city: string }).city === "Atlantis" ? { block: "no such place" } : undefined,
        prepareNextTurn: ({ messages }) =>
          messages.some((m) => m.role === "tool") ? { model: "second" } : undefined,
        shouldStopAfterTurn: ({ turn }) => turn === 2,
      },
    });
    const output = await runtime.start({ task: "weather?" }).done;
    expect(server.requests.map((r) => r.body.model)).toEqual(["first", "second"]);
    expect(server.requests[1]?.body.messages.find((m) => m.role === "tool")?.content).toMatch(
      /^error:\n<tool_output source="weather">\nno such place\n/,
    );
    // Stopped after turn 2: its tool call did not run.
    expect(output).toMatchObject({ reason: "done", turns: 2, toolCalls: 1 });
    await runtime.close();
  });

  it("resumes a run it started: an aborted agent goes on with a follow-up, keeping its conversation", async () => {
    server.script(
      {
        match: { lastUser: "count" },
        reply: { text: "one two three ".repeat(50), chunks: 50, chunkDelayMs: 20 },
      },
      { match: { lastUser: "Go on." }, reply: { text: "four" } },
    );
    const runtime = await createRuntime({
      settings: {
        defaultModel: "scripted",
        providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      },
      agents: [{ name: "counter", description: "Counts." }],
      env: {},
    });
    const first = runtime.start({ task: "count" });
    for await (const event of first.events()) if (event.type === "model.delta") break;
    first.abort("enough for now");
    expect((await first.done).reason).toBe("aborted");
    expect(await runtime.resume(first.runId, { agentId: first.agentId })).toBeUndefined();
    const again = await runtime.resume(first.runId, { agentId: first.agentId, followUp: "Go on." });
    expect(await again?.done).toMatchObject({ reason: "done", result: "four" });
    const users = server.requests
      .at(-1)
      ?.body.messages.filter((m) => m.role === "user")
      .map((m) => m.content);
    expect(users).toEqual(["count", "Go on."]);
    expect(runtime.agents().map((agent) => agent.name)).toEqual(["counter"]);
    await runtime.close();
  });

  it("runs on NATS when given a URL", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    server.script({ reply: { text: "over NATS" } });
    const runtime = await createRuntime({
      settings: {
        nats: { prefix },
        defaultModel: "scripted",
        providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      },
      agents: [{ name: "a", description: "A." }],
      nats: url,
      env: {},
    });
    const handle = runtime.start({ task: "x" });
    const types: string[] = [];
    for await (const event of handle.events()) types.push(event.type);
    expect(types[0]).toBe("agent.started");
    expect(types.at(-1)).toBe("agent.stopped");
    expect((await handle.done).result).toBe("over NATS");
    await runtime.close();
    await removePrefix(url, prefix);
  });

  it("stops at the first tool error with onToolError: stop, and goes on by default", async () => {
    server.script(
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "flaky", arguments: {} }] } },
      { match: { turn: 1 }, reply: { toolCalls: [{ name: "flaky", arguments: {} }] } },
      { match: { turn: 2 }, reply: { text: "recovered" } },
    );
    const flaky = defineTool({
      name: "flaky",
      description: "Fails.",
      effect: "read",
      parameters: z.object({}),
      execute: () => ({ ok: false, output: "", error: "disk full", recoveryHint: "free some space" }),
    });
    const settings = {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    };
    const strict = await createRuntime({
      settings,
      agents: [{ name: "a", description: "A.", tools: ["flaky"], onToolError: "stop" }],
      tools: [flaky],
      env: {},
    });
    expect(await strict.start({ task: "x" }).done).toMatchObject({
      reason: "failed",
      error: "flaky failed (onToolError: stop): disk full",
    });
    await strict.close();
    const lenient = await createRuntime({
      settings,
      agents: [{ name: "a", description: "A.", tools: ["flaky"] }],
      tools: [flaky],
      env: {},
    });
    expect(await lenient.start({ task: "x" }).done).toMatchObject({ reason: "done", result: "recovered" });
    await lenient.close();
  });

  it("gives an agent the tools its YAML's toolModules export", async () => {
    const { dir, dispose } = tempTree({
      "config/troupe.yaml": "defaultModel: scripted\n",
      "config/agents/a.yaml": "name: a\ndescription: A.\ntoolModules: [./tools/clock.mjs]\n",
      "config/tools/clock.mjs": `import { defineTool } from "${join(ROOT, "dist/index.js")}";\nimport { z } from "${join(ROOT, "node_modules/zod/index.js")}";\nexport const clock = defineTool({ name: "clock", description: "The time.", effect: "read", parameters: z.object({}), execute: () => ({ ok: true, output: "12:00" }) });\n`,
    });
    try {
      server.script(
        { match: { turn: 1 }, reply: { toolCalls: [{ name: "clock", arguments: {} }] } },
        { match: { turn: 2 }, reply: { text: "noon" } },
      );
      const runtime = await createRuntime({
        config: join(dir, "config"),
        env: { OPENAI_BASE_URL: server.baseURL },
      });
      expect(await runtime.start({ task: "time?" }).done).toMatchObject({ reason: "done", result: "noon" });
      expect(server.requests[0]?.body.tools?.map((t) => t.function.name)).toEqual(["clock"]);
      expect(server.requests[1]?.body.messages.find((m) => m.role === "tool")?.content).toContain("12:00");
      await runtime.close();
    } finally {
      dispose();
    }
  });
});
