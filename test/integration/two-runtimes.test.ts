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

/*
 * Two runtimes in one process (a library user's two, or a test's daemon and worker) may host agents
 * of the same run and agent ids on two buses. Each agent is decided by its own runtime's settings:
 * here, whether its context needs compacting.
 */
let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
const prefixes = [uniquePrefix(), uniquePrefix()];
const buses: NatsBus[] = [];
const runtimes: Runtime[] = [];

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({}));
});
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.close();
  for (const bus of buses.splice(0)) await bus.close();
  await server.close();
  dispose();
  for (const prefix of prefixes) await removePrefix(inject("natsUrl"), prefix);
});

async function runtime(prefix: string, contextWindow: number, tools: Tool[]) {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: { contextWindow } } } },
    },
    [{ name: "coder", description: "Works.", tools: tools.map((tool) => tool.name) }],
  );
  const bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  buses.push(bus);
  const made = await new Runtime({ config, workspace: ws, env: {}, bus, tools }).open();
  runtimes.push(made);
  return made;
}

it("hosts agents of the same ids in two runtimes of one process, each by its own runtime's settings", async () => {
  const releases = new Map<string, () => void>();
  const held = new Map(
    ["first", "second"].map((which) => [which, new Promise<void>((resolve) => releases.set(which, resolve))]),
  );
  const hold = defineTool({
    name: "hold",
    description: "Waits until the test lets it go.",
    effect: "read",
    parameters: z.object({ which: z.string() }),
    execute: async ({ which }) => {
      await held.get(which);
      return { ok: true, output: "held" };
    },
  }) as Tool;
  // The first runtime's window is roomy; the second's (60 tokens) is too small for any conversation.
  const roomy = await runtime(prefixes[0] as string, 128_000, [hold]);
  const cramped = await runtime(prefixes[1] as string, 60, [hold]);
  server.script(
    {
      match: { turn: 1, lastUser: "first" },
      reply: { toolCalls: [{ name: "hold", arguments: { which: "first" } }] },
    },
    { match: { lastUser: "first" }, reply: { text: "first done" }, times: Infinity },
    {
      match: { turn: 1, lastUser: "second" },
      reply: { toolCalls: [{ name: "hold", arguments: { which: "second" } }] },
    },
    { match: { lastUser: "second" }, reply: { text: "second done" }, times: Infinity },
    { reply: { text: "a summary" }, times: Infinity },
  );
  const ids = { runId: "run-same01", agentId: "coder-same01" };
  const first = roomy.start({ task: "first", ...ids });
  await until(() => server.requests.length >= 1);
  // The same ids in the other runtime, started while the first agent's tool runs, and hosted there
  // (its own tool held) while the first goes on.
  const second = cramped.start({ task: "second", ...ids });
  await until(() => server.requests.length >= 2);
  releases.get("first")?.();
  const output = await first.done;
  releases.get("second")?.();
  await second.done;
  expect(output.reason).toBe("done");
  expect(output.result).toBe("first done");
  const compactedOf = async (bus: NatsBus) => {
    const found = [];
    for await (const { envelope } of bus.eventLog.read({ runId: ids.runId }))
      if (envelope.type === "context.compacted") found.push(envelope);
    return found;
  };
  // The cramped runtime's agent compacted; the roomy one's checks were its own runtime's: nothing to compact.
  expect((await compactedOf(buses[1] as NatsBus)).length).toBeGreaterThan(0);
  expect(await compactedOf(buses[0] as NatsBus)).toEqual([]);
});

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  expect(done()).toBe(true);
}
