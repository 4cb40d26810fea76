import { afterEach, beforeEach, expect, it } from "vitest";
import { actorKey, placementOf, workerPlacement } from "../../src/actors/placement.js";
import { Runtime } from "../../src/actors/runtime.js";
import type { ChildSpec } from "../../src/actors/subagents.js";
import { Worker } from "../../src/actors/worker.js";
import type { Bus } from "../../src/bus/bus.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { testConfig } from "../support/config.js";

/*
 * A worker too busy to answer a spawn request in time reads it late: by then the parent has kept
 * the child for itself, and the worker must start nothing (a child hosted twice ran on one host
 * while its parent waited on the other: leads of a 10,000-agent run never ended).
 */
let server: ScriptedModelServer;
let under: BusUnderTest;
beforeEach(async () => {
  // A child hosted by a worker is still at its first model call when the tests read its placement
  // (one that finished would have had its record removed by then).
  server = await ScriptedModelServer.start([
    { reply: { text: "scouted", delayMs: 3000 }, times: Number.POSITIVE_INFINITY },
  ]);
  under = await natsBus();
});
afterEach(async () => {
  await under.dispose();
  await server.close();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The bus with every responder it serves starting `before` ms late (a host whose event loop is
 * busy), or answering `after` ms after it is done (an answer slow on its way back).
 */
function slowResponders(bus: Bus, { before = 0, after = 0 }): Bus {
  return new Proxy(bus, {
    get: (target, key) => {
      if (key !== "reply") {
        const value = Reflect.get(target, key);
        return typeof value === "function" ? value.bind(target) : value;
      }
      return ((pattern, responder, options) =>
        target.reply(
          pattern,
          async (...args) => {
            await sleep(before);
            const answer = await responder(...args);
            await sleep(after);
            return answer;
          },
          options,
        )) satisfies Bus["reply"];
    },
  });
}

function scoutConfig() {
  return testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "scout", description: "Scouts.", readOnly: true, tools: ["read_file"] }],
  );
}

function childOf(config: ReturnType<typeof scoutConfig>, childId: string, parentId: string): ChildSpec {
  return {
    definition: config.agents.get("scout")?.definition as ChildSpec["definition"],
    task: "Look.",
    childId,
    parentId,
    depth: 1,
    budget: {},
  };
}

/** A worker on a runtime of its own over `bus`. */
async function startWorker(bus: Bus, config: ReturnType<typeof scoutConfig>) {
  const runtime = await new Runtime({ config, bus, workspace: process.cwd(), env: {} }).open();
  const worker = new Worker(runtime, silentLogger, { heartbeatMs: 100, deadAfterMs: 5000 });
  await worker.start();
  return {
    worker,
    stop: async () => {
      await worker.stop();
      await runtime.close();
    },
  };
}

it("a worker that reads a spawn request after its parent gave up on it starts nothing: the parent keeps the child", async () => {
  const config = scoutConfig();
  const { worker, stop } = await startWorker(slowResponders(under.bus, { before: 600 }), config);
  try {
    const child = childOf(config, "scout-0123456789", "lead-x");
    expect(await workerPlacement(under.bus, silentLogger, 200)("run-late", child)).toBe(false);
    await sleep(1000); // the worker has read the request by now
    expect(worker.hosted).toEqual([]);
    const record = await (await under.bus.kv("actors")).get(actorKey("run-late", child.childId));
    expect(placementOf(record?.value)?.worker).toBe("parent:lead-x");
  } finally {
    await stop();
  }
});

it("a parent whose request went unanswered in time finds the worker that took the child, and leaves it there", async () => {
  const config = scoutConfig();
  const { worker, stop } = await startWorker(slowResponders(under.bus, { after: 600 }), config);
  try {
    const child = childOf(config, "scout-9876543210", "lead-y");
    expect(await workerPlacement(under.bus, silentLogger, 200)("run-lost", child)).toBe(true);
    const record = await (await under.bus.kv("actors")).get(actorKey("run-lost", child.childId));
    expect(placementOf(record?.value)?.worker).toBe(worker.id);
    await sleep(700); // its answer is sent before the worker stops
  } finally {
    await stop();
  }
});
