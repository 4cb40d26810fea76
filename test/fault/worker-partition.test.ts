import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import type { AgentRecord } from "../../src/actors/agent-store.js";
import type { Heartbeat, Placement } from "../../src/actors/placement.js";
import { Runtime } from "../../src/actors/runtime.js";
import { answersNats, findNatsServer, freePort } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { loadConfig } from "../../src/config/load.js";
import type { Envelope } from "../../src/events/envelope.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { exited, tempTree, workerArgs } from "../support/cli.js";
import { makeHosts } from "../support/hosts.js";
import { collect, waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** Another multi-host test may run at the same time on 10.88.0. */
const SUBNET = "10.89.0";
const LET_GO = "another host took this agent over";

/** A tool that writes: each call appends the answer to noted.txt in the workspace. */
const NOTE_ANSWER = `import { appendFileSync } from "node:fs";
import { readFileSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
export const noteAnswer = {
  name: "note_answer",
  description: "Notes the answer down.",
  effect: "write",
  parameters: z.object({ answer: z.string() }),
  execute: ({ answer }, { workspace }) => {
    appendFileSync(join(workspace, "noted.txt"), answer + "\\n");
    return { ok: true, output: "noted" };
  },
};
`;

/*
 * Two `troupe worker`s, each on a host of its own (a network namespace), reach NATS and the model
 * server over a bridge. The one hosting the explorer loses its link while the explorer waits on a
 * slow model call, for longer than dead-after: the other takes the explorer over. When the link
 * comes back the first still holds the explorer (a zombie): its model call answers (with a stale
 * answer here), it publishes, and it tries to write the snapshot.
 */
it("a worker cut off from NATS past dead-after is taken over; when its link comes back it lets the child go at its first snapshot write, and nothing it still sends reaches readers", async () => {
  const hosts = makeHosts({ a: 11, b: 12 }, SUBNET);
  cleanups.push(() => hosts.remove());
  const bridge = hosts.address.bridge as string;
  const { dir, dispose } = tempTree({
    "config/troupe.yaml": `nats:\n  prefix: ${uniquePrefix()}\n  embedded: false\ndefaultAgent: lead\ndefaultModel: scripted\n`,
    "config/agents/lead.yaml":
      "name: lead\ndescription: Leads.\nsubagents: [explorer]\ntoolModules: [./note-answer.mjs]\n",
    "config/note-answer.mjs": NOTE_ANSWER,
    "config/agents/explorer.yaml":
      "name: explorer\ndescription: Explores.\nreadOnly: true\ntools: [read_file]\n",
    "ws/notes.txt": "the answer is 42\n",
  });
  cleanups.push(dispose);
  // The tool module imports zod: it resolves from this checkout's node_modules.
  symlinkSync(join(process.cwd(), "node_modules"), join(dir, "config/node_modules"));

  // A NATS server of the test's own, on the bridge: the hosts reach it there, and so does this process.
  const port = await freePort();
  const nats = spawn(
    findNatsServer() ?? "nats-server",
    ["-a", bridge, "-p", String(port), "-js", "-sd", join(dir, "nats")],
    { stdio: "ignore" },
  );
  cleanups.push(async () => {
    nats.kill("SIGKILL");
    await exited(nats);
  });
  await waitFor("the NATS server", () => answersNats(bridge, port, 500), 10_000);
  const url = `nats://${bridge}:${port}`;
  const server = await ScriptedModelServer.start([], { host: bridge });
  cleanups.push(() => server.close());

  const env = {
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: server.baseURL,
    OPENAI_API_KEY: "",
    HOME: dir,
    TROUPE_DATA_DIR: join(dir, "data"),
  };
  const workers = new Map<string, { child: ChildProcess; log: () => string }>();
  for (const host of ["a", "b"]) {
    const child = hosts.spawn(
      host,
      process.execPath,
      workerArgs(join(dir, "config"), { heartbeatMs: 200, deadAfterMs: 1500 }),
      { cwd: join(dir, "ws"), env, stdio: ["ignore", "ignore", "pipe"] },
    );
    let log = "";
    child.stderr?.on("data", (chunk) => (log += chunk));
    cleanups.push(async () => {
      child.kill("SIGKILL");
      await exited(child);
    });
    workers.set(host, { child, log: () => log });
  }

  const config = loadConfig({
    config: join(dir, "config"),
    env: { NATS_URL: url, OPENAI_BASE_URL: server.baseURL },
  });
  const bus = await NatsBus.connect({ url, prefix: config.troupe.nats.prefix });
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
    // The first host's explorer asks first and is answered late, after its link is back: a stale
    // answer, which must not reach the lead. The explorer resumed on the other host asks again. Late
    // enough that the link is back when the answer is sent (the takeover takes 2-3 s): an answer sent
    // into a cut link comes when TCP next tries again, which backs off to many seconds (CI once
    // waited past the test's patience).
    { match: as("explorer", 2), reply: { text: "The answer is 41.", delayMs: 8000 } },
    {
      match: as("explorer", 2),
      reply: { text: "The answer is 42.", delayMs: 3000 },
      times: Number.POSITIVE_INFINITY,
    },
    { match: as("lead", 2), reply: { toolCalls: [{ name: "note_answer", arguments: { answer: "42" } }] } },
    { match: as("lead", 3), reply: { text: "42, noted." } },
  );
  const runtime = await new Runtime({ config, bus, workspace: join(dir, "ws"), env: {} }).open();
  cleanups.push(() => runtime.close());
  const handle = runtime.start({ task: "Find the answer and note it", approval: "yolo" });

  // Wait for the explorer's slow second model call to reach the server, then cut its host's link.
  let childId = "";
  for await (const { envelope } of bus.eventLog.read({ runId: handle.runId, follow: true })) {
    if (envelope.type === "subagent.spawned") childId = (envelope.data as { childId: string }).childId;
    if (envelope.agentId === childId && envelope.type === "tool.finished") break;
  }
  await waitFor("the explorer's second model call", () => server.requests.length === 3);
  const key = `${handle.runId}.${childId}`;
  const placed = await (await bus.kv("actors")).get<Placement>(key);
  const zombieId = placed?.value.worker ?? "";
  const zombiePid = (await heartbeats.get<Heartbeat>(zombieId))?.value.pid;
  const [zombieHost, zombie] = [...workers].find(([, w]) => w.child.pid === zombiePid) ?? [];
  if (!zombieHost || !zombie) throw new Error("no worker hosts the explorer");
  hosts.link(zombieHost, "down");

  // The other worker takes the explorer over; then the link comes back.
  const signal = AbortSignal.timeout(15_000);
  for await (const { envelope } of bus.eventLog.read({ runId: handle.runId, follow: true, signal }))
    if (envelope.agentId === childId && envelope.type === "agent.resumed") break;
  hosts.link(zombieHost, "up");

  const output = await handle.done;
  expect(output).toMatchObject({ reason: "done", result: "42, noted." });
  // The zombie's model call answered after it came back, and its host let the explorer go at its
  // first snapshot write; its next heartbeat names no agent.
  await waitFor("the zombie to let the explorer go", () => zombie.log().includes(LET_GO), 30_000).catch(
    (error) => {
      throw new Error(`${error.message}; its log: ${zombie.log().slice(-3000)}`);
    },
  );
  expect(zombie.log().split(LET_GO)).toHaveLength(2);
  await waitFor("the zombie's heartbeat to name no agent", async () => {
    const beat = await heartbeats.get<Heartbeat>(zombieId);
    return beat?.value.agentCount === 0;
  });

  // What the readers get of the explorer: one agent, its seqs without a gap or a repeat, its answer
  // the new host's; the stale answer reached neither the log's readers nor the lead.
  const explorer: Envelope[] = (await collect(bus.eventLog.read({ runId: handle.runId })))
    .map((e) => e.envelope)
    .filter((e) => e.agentId === childId);
  expect(explorer.map((e) => e.seq)).toEqual(explorer.map((_, i) => i));
  expect(explorer.filter((e) => e.type === "agent.started")).toHaveLength(1);
  expect(explorer.filter((e) => e.type === "agent.resumed")).toHaveLength(1);
  expect(explorer.filter((e) => e.type === "agent.stopped")).toHaveLength(1);
  expect(explorer.at(-1)?.data).toMatchObject({ reason: "done", result: "The answer is 42." });
  const asked = server.requests.map((request) => JSON.stringify(request.body.messages));
  expect(asked.at(-1)).toContain("The answer is 42.");
  for (const messages of asked) expect(messages).not.toContain("The answer is 41.");
  // The explorer's record is the new host's: stopped with its answer, claiming no seq the log lacks.
  const record = await (await bus.kv("snapshots")).get<AgentRecord>(key);
  expect(record?.value.done).toBe(true);
  expect(record?.value.nextSeq).toBeLessThanOrEqual(explorer.length);
  expect(JSON.stringify(record?.value.snapshot)).toContain("The answer is 42.");
  expect(JSON.stringify(record?.value.snapshot)).not.toContain("The answer is 41.");
  // The new host's placement is gone with the explorer; the lead's write happened once.
  expect(await (await bus.kv("actors")).get(key)).toBeNull();
  expect(readFileSync(join(dir, "ws/noted.txt"), "utf8")).toBe("42\n");
}, 90_000);
