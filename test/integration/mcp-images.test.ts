import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { EVERYTHING } from "../support/mcp-servers.js";

/*
 * An MCP tool's image (server-everything's get-tiny-image, a PNG) reaches a model that takes images
 * (`vision: true`) as an image part after the tool's result; any other model reads a line saying
 * what it was.
 */

let model: ScriptedModelServer;
let ws: string;
let dispose: () => void;
beforeEach(async () => {
  model = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "README.md": "# project\n" }));
  model.script(
    {
      match: { turn: 1 },
      reply: { toolCalls: [{ name: "everything__get-tiny-image", arguments: {} }] },
      times: Number.POSITIVE_INFINITY,
    },
    { match: { turn: 2 }, reply: { text: "A small logo." }, times: Number.POSITIVE_INFINITY },
  );
});
afterEach(async () => {
  await model.close();
  dispose();
});

async function secondRequest(vision: boolean) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      approval: { policy: "yolo" },
      providers: { openai: { baseURL: model.baseURL, models: { scripted: { vision } } } },
      mcpServers: { everything: { command: process.execPath, args: [EVERYTHING] } },
    },
    [{ name: "viewer", description: "Looks.", tools: ["everything__get-tiny-image"] }],
  );
  const rt = await new Runtime({ config, workspace: ws, env: {} }).open();
  const output = await rt.start({ task: "What is the picture?", agent: "viewer" }).done;
  await rt.close();
  expect(output.result).toBe("A small logo.");
  return model.requests.at(-1)?.body.messages ?? [];
}

type Part = { type: string; text?: string; image_url?: { url: string } };

describe("an MCP tool's image", () => {
  it("is shown to a model that takes images, as an image part after the tool's result", async () => {
    const messages = await secondRequest(true);
    const at = messages.findIndex((m) => m.role === "tool");
    const result = messages[at];
    expect(String(result?.content)).toMatch(
      /\[image: image\/png, [\d.]+ (bytes|KB); shown to a model that takes images/,
    );
    const shown = messages[at + 1] as unknown as { role: string; content: Part[] };
    expect(shown.role).toBe("user");
    expect(shown.content[0]?.text).toContain("The images the tool calls returned");
    expect(shown.content[1]?.type).toBe("image_url");
    expect(shown.content[1]?.image_url?.url).toMatch(/^data:image\/png;base64,iVBORw0KGgo/);
  });

  it("is a line to any other model: no image part is sent", async () => {
    const messages = await secondRequest(false);
    expect(JSON.stringify(messages)).not.toContain("image_url");
    expect(String(messages.find((m) => m.role === "tool")?.content)).toMatch(/\[image: image\/png, /);
  });
});
