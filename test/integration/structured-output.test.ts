import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { loadConfig } from "../../src/config/load.js";
import { createRuntime } from "../../src/library.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { collect } from "../support/wait.js";

/*
 * Structured answers: an agent's `output` JSON Schema (or zod schema, in the library) is sent as
 * `response_format`, its final answer checked, asked for again once with what is wrong, and
 * delivered parsed; `output_invalid` when it still does not fit.
 */

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "a.txt": "alpha\n" }));
});
afterEach(async () => {
  await model.close();
  dispose();
});

const SCHEMA = {
  type: "object",
  properties: { title: { type: "string" }, stars: { type: "integer", minimum: 1, maximum: 5 } },
  required: ["title", "stars"],
  additionalProperties: false,
};

async function runtime(output: Record<string, unknown> | z.ZodType = SCHEMA) {
  return createRuntime({
    settings: {
      defaultModel: "scripted",
      providers: { openai: { baseURL: model.baseURL, models: { scripted: {} } } },
    },
    agents: [{ name: "critic", description: "Rates.", tools: ["read_file"], output }],
    workspace: ws,
    env: {},
  });
}

describe("an agent's output schema", () => {
  it("is sent as response_format; a fitting answer is delivered parsed", async () => {
    model.script({ reply: { text: '{"title":"Alpha","stars":4}' } });
    const rt = await runtime();
    const output = await rt.start({ task: "rate a.txt" }).done;
    await rt.close();
    expect(output.reason).toBe("done");
    expect(output.output).toEqual({ title: "Alpha", stars: 4 });
    expect(model.requests[0]?.body.response_format).toEqual({
      type: "json_schema",
      json_schema: { name: "output", schema: SCHEMA },
    });
  });

  it("asks again once, with what is wrong and no tools, when the answer does not fit; the second answer is delivered", async () => {
    model.script(
      { match: { turn: 1 }, reply: { text: '```json\n{"title":"Alpha","stars":9}\n```' } },
      { match: { turn: 2 }, reply: { text: '{"title":"Alpha","stars":5}' } },
    );
    const rt = await runtime();
    const handle = rt.start({ task: "rate a.txt" });
    const output = await handle.done;
    await rt.close();
    expect(output).toMatchObject({ reason: "done", output: { title: "Alpha", stars: 5 }, turns: 1 });
    const again = model.requests[1]?.body;
    expect(again?.tools).toBeUndefined();
    expect(String(again?.messages.at(-1)?.content)).toContain("/stars must be <= 5");
    // Both calls are the turn's: what they cost is the agent's.
    const spent = model.requests.length;
    expect(spent).toBe(2);
    expect(output.usage.outputTokens).toBeGreaterThan(10);
  });

  it("stops output_invalid when the second answer does not fit either, with the answer and what is wrong", async () => {
    model.script({ reply: { text: "four stars, I think" }, times: 2 });
    const rt = await runtime();
    const handle = rt.start({ task: "rate a.txt" });
    const output = await handle.done;
    const events = await collect(handle.events());
    await rt.close();
    expect(output).toMatchObject({ reason: "output_invalid", result: "four stars, I think" });
    expect(output.error).toContain("the answer does not fit the output schema: it is not JSON");
    expect(output.output).toBeUndefined();
    expect(events.filter((e) => e.type === "output.retried")).toHaveLength(1);
    expect(events.filter((e) => e.type === "model.completed")).toHaveLength(2);
  });

  it("takes a zod schema in the library", async () => {
    model.script({ reply: { text: '{"title":"Alpha","stars":3}' } });
    const rt = await runtime(z.object({ title: z.string(), stars: z.number().int() }));
    const output = await rt.start({ task: "rate a.txt" }).done;
    await rt.close();
    expect(output.output).toEqual({ title: "Alpha", stars: 3 });
    const sent = model.requests[0]?.body.response_format as {
      json_schema: { schema: Record<string, unknown> };
    };
    expect(sent.json_schema.schema).toMatchObject({ type: "object", required: ["title", "stars"] });
  });

  it("refuses a schema that is not one, in the agent's file, with where", () => {
    const { dir, dispose: done } = tempTree({
      "troupe.yaml": "defaultModel: scripted\n",
      "agents/critic.yaml": "name: critic\ndescription: Rates.\noutput:\n  type: objekt\n",
    });
    try {
      expect(() => loadConfig({ config: dir, env: {} })).toThrow(
        /agents\/critic\.yaml:4:3: output: not a JSON Schema/,
      );
    } finally {
      done();
    }
  });
});
