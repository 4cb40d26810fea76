import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { type CreateRuntimeOptions, createRuntime } from "../../src/index.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";

/*
 * OPENAI_BASE_URL points at the scripted server; the settings (in code or in troupe.yaml) point
 * elsewhere or nowhere. However the runtime is built, the model request must arrive at the server.
 */
let server: ScriptedModelServer;
let tree: { dir: string; dispose: () => void };
const DEAD = "http://127.0.0.1:9/v1";
beforeAll(async () => {
  server = await ScriptedModelServer.start();
  tree = tempTree({
    "config/troupe.yaml": `defaultModel: scripted\nproviders:\n  openai:\n    baseURL: ${DEAD}\n`,
    "config/agents/a.yaml": "name: a\ndescription: A.\n",
  });
});
afterAll(async () => {
  await server.close();
  tree.dispose();
});

const settings = { defaultModel: "scripted", providers: { openai: { baseURL: DEAD } } };
const agents = [{ name: "a", description: "A." }];

async function answerFrom(options: CreateRuntimeOptions): Promise<unknown> {
  const before = server.requests.length;
  server.script({ reply: { text: "from the scripted server" } });
  const runtime = await createRuntime(options);
  try {
    const output = await runtime.start({ task: "hello" }).done;
    expect(server.requests.length).toBe(before + 1);
    return output.result;
  } finally {
    await runtime.close();
  }
}

describe("OPENAI_BASE_URL, however a runtime is built", () => {
  const env = () => ({ OPENAI_BASE_URL: server.baseURL });

  it("wins over the settings given in code", async () => {
    expect(await answerFrom({ settings, agents, env: env() })).toBe("from the scripted server");
  });

  it("gives settings in code without a provider their model server", async () => {
    const bare = { defaultModel: "scripted" };
    expect(await answerFrom({ settings: bare, agents, env: env() })).toBe("from the scripted server");
  });

  it("wins over a config directory's troupe.yaml", async () => {
    const config = join(tree.dir, "config");
    expect(await answerFrom({ config, env: env() })).toBe("from the scripted server");
  });

  it("wins over the troupe.yaml that TROUPE_CONFIG names", async () => {
    const found = { ...env(), TROUPE_CONFIG: join(tree.dir, "config") };
    expect(await answerFrom({ env: found })).toBe("from the scripted server");
  });

  it("is read from process.env when no env is given", async () => {
    const saved = process.env.OPENAI_BASE_URL;
    process.env.OPENAI_BASE_URL = server.baseURL;
    try {
      expect(await answerFrom({ settings, agents })).toBe("from the scripted server");
    } finally {
      if (saved === undefined) delete process.env.OPENAI_BASE_URL;
      else process.env.OPENAI_BASE_URL = saved;
    }
  });

  it("applies on NATS as on the in-process bus", async () => {
    const url = inject("natsUrl");
    const prefix = uniquePrefix();
    const onNats = { ...settings, nats: { prefix } };
    try {
      expect(await answerFrom({ settings: onNats, agents, nats: url, env: env() })).toBe(
        "from the scripted server",
      );
    } finally {
      await removePrefix(url, prefix);
    }
  });
});

describe("createRuntime's options", () => {
  it("refuses settings without agents rather than drop them", async () => {
    await expect(createRuntime({ settings })).rejects.toThrow(
      "createRuntime: settings go with agents; without agents, give a config directory",
    );
  });
});
