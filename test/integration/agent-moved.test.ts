import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { z } from "zod";
import { AgentMovedError, type AgentRecord, AgentStore } from "../../src/actors/agent-store.js";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { memoryLogger, silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { defineTool, type Tool } from "../../src/tools/tool.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

/*
 * A host whose agent another host took over (it wrote the agent's snapshot back over the revision
 * it loaded, as a worker does when it takes over from one gone silent) finds out at its next
 * snapshot write: it lets the agent go there, and a write waiting on that snapshot never starts.
 */

const prefix = uniquePrefix();
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
let server: ScriptedModelServer;
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  cleanups.push(
    () => server.close(),
    () => removePrefix(inject("natsUrl"), prefix),
  );
});

async function connect(): Promise<NatsBus> {
  const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  cleanups.push(() => bus.close());
  return bus;
}

const record = (nextSeq: number): AgentRecord => ({
  v: 1,
  machineVersion: 1,
  runId: "run-m",
  agentId: "a",
  name: "a",
  depth: 0,
  task: "t",
  budget: {},
  nextSeq,
  elapsedMs: 0,
  snapshot: {},
  done: false,
});

it("a store whose write conflicts says the agent is no longer its own, writes nothing more of it, and refuses what waits on it", async () => {
  const here = await AgentStore.open(await connect(), silentLogger);
  const there = await AgentStore.open(await connect(), silentLogger);
  expect(await here.save("run-m", "a", async () => record(1))).toBe(true);
  expect(await there.takeOver("run-m", "a")).toMatchObject({ nextSeq: 1 });

  expect(await here.save("run-m", "a", async () => record(2))).toBe(false);
  await expect(here.settled("run-m", "a")).rejects.toBeInstanceOf(AgentMovedError);
  let taken = false;
  expect(
    await here.save("run-m", "a", async () => {
      taken = true;
      return record(3);
    }),
  ).toBe(false);
  expect(taken).toBe(false);
  expect(await there.load("run-m", "a")).toMatchObject({ nextSeq: 1 });
  // Loaded again, it is this host's to write once more.
  expect(await here.load("run-m", "a")).toMatchObject({ nextSeq: 1 });
  expect(await here.save("run-m", "a", async () => record(4))).toBe(true);
});

it("an agent taken over by another host while it waits on its model lets go at its next snapshot write: its write call never runs, and it publishes nothing more", async () => {
  let writes = 0;
  const countWrite = defineTool({
    name: "count_write",
    description: "Writes (counts).",
    effect: "write",
    parameters: z.object({}),
    execute: () => ({ ok: true, output: `written ${++writes}` }),
  }) as Tool;
  server.script(
    { match: { turn: 1 }, reply: { toolCalls: [{ name: "count_write", arguments: {} }], delayMs: 1000 } },
    { match: { turn: 2 }, reply: { text: "wrote it" } },
  );
  const { dir, dispose } = tempTree({});
  cleanups.push(dispose);
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "writer", description: "Writes.", tools: ["count_write"] }],
  );
  const { log, records } = memoryLogger("info");
  const bus = await connect();
  const runtime = await new Runtime({
    config,
    bus,
    log,
    workspace: dir,
    env: {},
    tools: [countWrite],
  }).open();
  cleanups.push(() => runtime.close());
  const handle = runtime.start({ task: "Write", approval: "yolo" });

  // While its model call is out, another host takes it over from its stored snapshot.
  const other = await AgentStore.open(await connect(), silentLogger);
  await waitFor("its model call and its first snapshot", async () => {
    return server.requests.length === 1 && (await other.takeOver(handle.runId, handle.agentId)) !== undefined;
  });
  const outcome = await Promise.race([handle.moved.then(() => "let go"), handle.done]);

  expect(outcome).toBe("let go");
  expect(writes).toBe(0);
  const letGo = records.filter((r) => String(r.msg).includes("another host took this agent over"));
  expect(letGo).toHaveLength(1);
  expect(letGo[0]).toMatchObject({ level: 40, agentId: handle.agentId });
  const types = (await collect(bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope.type);
  expect(types).not.toContain("tool.started");
  expect(types).not.toContain("agent.stopped");
  expect(server.requests).toHaveLength(1);
});
