import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { afterEach, expect, inject, it } from "vitest";
import type { Heartbeat, Placement } from "../../src/actors/placement.js";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { loadConfig } from "../../src/config/load.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { tempTree, workerArgs } from "../support/cli.js";
import { collect, waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("spawns subagents on attached workers; a worker killed with SIGKILL mid-run hands its child to another, which resumes it from its snapshot", async () => {
  const url = inject("natsUrl");
  const prefix = uniquePrefix();
  const server = await ScriptedModelServer.start();
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${prefix}\ndefaultAgent: lead\ndefaultModel: scripted\n`,
    "config/agents/lead.yaml": "name: lead\ndescription: Leads.\nsubagents: [explorer]\n",
    "config/agents/explorer.yaml":
      "name: explorer\ndescription: Explores.\nreadOnly: true\ntools: [read_file]\n",
    "ws/notes.txt": "the answer is 42\n",
  });
  cleanups.push(
    dispose,
    () => server.close(),
    () => removePrefix(url, prefix),
  );
  const env = { ...process.env, NATS_URL: url, OPENAI_BASE_URL: server.baseURL, OPENAI_API_KEY: "" };

  const workers: ChildProcess[] = [0, 1].map(() =>
    spawn(process.execPath, workerArgs(join(dir, "config"), { heartbeatMs: 200, deadAfterMs: 1000 }), {
      cwd: join(dir, "ws"),
      env,
      stdio: ["ignore", "ignore", "pipe"],
    }),
  );
  for (const worker of workers) cleanups.push(() => void worker.kill("SIGKILL"));

  const bus = await NatsBus.connect({ url, prefix });
  cleanups.push(() => bus.close());
  const heartbeats = await bus.kv("workers");
  await waitFor("two workers", async () => (await heartbeats.keys()).length === 2, 15_000);

  const as = (name: string, turn: number) => ({ system: `"${name}"`, turn });
  server.script(
    {
      match: as("lead", 1),
      reply: { toolCalls: [{ name: "subagent_explorer", arguments: { task: "What is the answer?" } }] },
    },
    {
      match: as("explorer", 1),
      reply: { toolCalls: [{ name: "read_file", arguments: { path: "notes.txt" } }] },
    },
    // The explorer's second call is slow: its worker dies while it waits. The resumed explorer asks again.
    {
      match: as("explorer", 2),
      reply: { text: "The answer is 42.", delayMs: 3000 },
      times: Number.POSITIVE_INFINITY,
    },
    { match: as("lead", 2), reply: { text: "42, says the explorer." } },
  );
  const config = loadConfig({
    config: join(dir, "config"),
    env: { NATS_URL: url, OPENAI_BASE_URL: server.baseURL },
  });
  const runtime = await new Runtime({ config, bus, workspace: join(dir, "ws"), env: {} }).open();
  cleanups.push(() => runtime.close());
  const handle = runtime.start({ task: "Find the answer" });

  // Wait for the explorer to be in its slow second model call on some worker, then kill that worker.
  let childId = "";
  for await (const { envelope } of bus.eventLog.read({ runId: handle.runId, follow: true })) {
    if (envelope.type === "subagent.spawned") childId = (envelope.data as { childId: string }).childId;
    if (envelope.agentId === childId && envelope.type === "tool.finished") break;
    if (envelope.agentId === handle.agentId && envelope.type === "agent.stopped")
      throw new Error("the run ended early");
  }
  const placement = await (await bus.kv("actors")).get<Placement>(`${handle.runId}.${childId}`);
  const host = placement?.value.worker ?? "";
  // What `troupe status` shows of a worker: the agents it hosts, and when it last said so.
  let beat = await heartbeats.get<Heartbeat>(host);
  await waitFor(
    "the worker's heartbeat to name its child",
    async () => {
      beat = await heartbeats.get<Heartbeat>(host);
      return beat?.value.agents?.includes(`${handle.runId}.${childId}`) === true;
    },
    3000,
  );
  expect(beat?.value).toMatchObject({ agents: [`${handle.runId}.${childId}`], agentCount: 1 });
  expect(Date.now() - (beat?.value.at ?? 0)).toBeLessThan(5000);
  const victim = workers.find((w) => w.pid === beat?.value.pid);
  expect(victim).toBeDefined();
  victim?.kill("SIGKILL");

  const output = await handle.done;
  expect(output).toMatchObject({ reason: "done", result: "42, says the explorer." });
  const events: Envelope[] = (await collect(bus.eventLog.read({ runId: handle.runId }))).map(
    (e) => e.envelope,
  );
  const explorer = events.filter((e) => e.agentId === childId);
  // One explorer, resumed, its events without a gap. Reads are not journaled: when the snapshot
  // the new worker resumes from was taken before the read's result, the read runs once more.
  expect(explorer.filter((e) => e.type === "agent.started")).toHaveLength(1);
  expect(explorer.filter((e) => e.type === "tool.started").length).toBeGreaterThanOrEqual(1);
  expect(explorer.filter((e) => e.type === "tool.started").length).toBeLessThanOrEqual(2);
  expect(explorer.map((e) => e.seq)).toEqual(explorer.map((_, i) => i));
  expect(explorer.at(-1)?.data).toMatchObject({ reason: "done", result: "The answer is 42." });
  const taken = await (await bus.kv("actors")).get<Placement>(`${handle.runId}.${childId}`);
  expect(taken).toBeNull();
  const leadResult = server.requests.at(-1)?.body.messages.find((m) => m.role === "tool")?.content;
  expect(leadResult).toContain("The answer is 42.");
}, 60_000);
