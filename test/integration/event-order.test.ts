import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { z } from "zod";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
const prefix = uniquePrefix();
const realFetch = globalThis.fetch;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({}));
});
afterEach(async () => {
  globalThis.fetch = realFetch;
  await server.close();
  dispose();
  await removePrefix(inject("natsUrl"), prefix);
});

/** Records, in order, the model requests and the writes of events saying the agent calls its model. */
function recordOrder(bus: NatsBus): string[] {
  const order: string[] = [];
  globalThis.fetch = ((...args: Parameters<typeof fetch>) => {
    order.push("model request");
    return realFetch(...args);
  }) as typeof fetch;
  const publish = bus.connection.publish.bind(bus.connection);
  bus.connection.publish = (subject, payload, options) => {
    const text = typeof payload === "string" ? payload : new TextDecoder().decode(payload);
    if (subject.startsWith(`${prefix}.evt.`) && text.includes('"to":"callingModel"'))
      order.push("callingModel events");
    publish(subject, payload, options);
  };
  return order;
}

/** A write that never finishes: a host stopped during it leaves its outcome unknown. */
const slowWrite = defineTool({
  name: "slow_write",
  description: "Writes slowly.",
  effect: "write",
  parameters: z.object({}),
  execute: (_args, { signal }) =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve({ ok: true, output: "written" }), 30_000);
      signal.addEventListener("abort", () => clearTimeout(timer));
    }),
}) as Tool;

async function runtime() {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "worker", description: "Works.", tools: ["slow_write"] }],
  );
  const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  const rt = await new Runtime({ config, workspace: ws, env: {}, tools: [slowWrite], bus }).open();
  const close = async () => {
    await rt.close();
    await bus.close();
  };
  return { rt, bus, close };
}

// Building a model request is CPU work (a fresh process first loads Node's HTTP client: tens of
// ms). The state's events are written first, so an observer, or a client following a run resumed
// after a crash, sees the agent calling its model without waiting for that work.
it("writes a state's events to NATS before the model call that state makes is sent", async () => {
  server.script({ reply: { text: "hello" } });
  const { rt, bus, close } = await runtime();
  const order = recordOrder(bus);
  try {
    const output = await rt.start({ task: "say hello" }).done;
    expect(output.reason).toBe("done");
    expect(order).toEqual(["callingModel events", "model request"]);
  } finally {
    await close();
  }
});

it("does so too when a resumed agent goes from its tools to its model with nothing else to say", async () => {
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "slow_write", arguments: {} }] } },
    { match: { turn: 2 }, reply: { text: "carried on" } },
  );
  const first = await runtime();
  const handle = first.rt.start({ task: "write", approval: "yolo" });
  for await (const { envelope } of first.bus.eventLog.read({ runId: handle.runId, follow: true }))
    if (envelope.type === "tool.started") break;
  handle.detach();
  await first.close();

  // The journal says the write was running: the resumed agent says it finished (outcome unknown),
  // then changes to the model call; those events still leave before the model request.
  const second = await runtime();
  const order = recordOrder(second.bus);
  try {
    const resumed = await second.rt.resume(handle.runId, handle.agentId, { as: "own-record" });
    expect((await resumed?.done)?.result).toBe("carried on");
    expect(order).toEqual(["callingModel events", "model request"]);
  } finally {
    await second.close();
  }
});
