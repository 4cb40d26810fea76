// Another program's view of the bus: the `nats` package (nats.js v2), not the @nats-io v3 Troupe uses.
import { connect, type JsMsg, type Msg, type NatsConnection } from "nats";
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { Runtime } from "../../src/actors/runtime.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { subjects, uniquePrefix } from "../../src/bus/subjects.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
let foreign: NatsConnection;
const prefix = uniquePrefix();
const url = () => inject("natsUrl");
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({ "README.md": "# project\n", "notes.md": "notes\n" }));
  foreign = await connect({ servers: url() });
});
afterEach(async () => {
  await foreign.close();
  await server.close();
  dispose();
  await removePrefix(url(), prefix);
});

const agents = [
  { name: "lead", description: "Leads.", tools: ["read_file"], subagents: ["explorer", "reviewer"] },
  { name: "explorer", description: "Finds things.", tools: ["read_file"], readOnly: true },
  { name: "reviewer", description: "Reviews.", tools: ["read_file"], readOnly: true },
];
const as = (name: string) => ({ system: `"${name}"` });
const read = (path: string) => ({ name: "read_file", arguments: { path } });

/** A lead that reads and runs two subagents at once, each of which reads; 5 tool calls, 3 agents. */
function script(): void {
  server.script(
    {
      match: as("lead"),
      reply: {
        toolCalls: [
          read("README.md"),
          { name: "subagent_explorer", arguments: { task: "find notes" } },
          { name: "subagent_reviewer", arguments: { task: "review notes" } },
        ],
      },
    },
    { match: as("explorer"), reply: { toolCalls: [read("notes.md")] } },
    { match: as("reviewer"), reply: { toolCalls: [read("notes.md")] } },
    { match: as("explorer"), reply: { text: "found" } },
    { match: as("reviewer"), reply: { text: "fine" } },
    { match: as("lead"), reply: { text: "done" } },
  );
}

interface Seen {
  subject: string;
  json: unknown;
}

function decode(msg: Msg | JsMsg): Seen {
  return { subject: msg.subject, json: JSON.parse(new TextDecoder().decode(msg.data)) };
}

it("a foreign client subscribed by type gets every tool.requested and agent.stopped of a run with subagents, each alone on its subject, and a JetStream consumer filtered by type replays them", async () => {
  const names = subjects(prefix);
  const live: Seen[] = [];
  for (const type of ["tool.requested", "agent.stopped"])
    foreign.subscribe(`${prefix}.evt.*.*.${type}`, { callback: (_, msg) => live.push(decode(msg)) });
  await foreign.flush();

  script();
  const bus = await NatsBus.connect({ url: url(), prefix });
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    agents,
  );
  const rt = await new Runtime({ config, workspace: ws, env: {}, bus }).open();
  const handle = rt.start({ task: "look around", agent: "lead" });
  expect((await handle.done).reason).toBe("done");
  const logged = (await collect(rt.bus.eventLog.read({ runId: handle.runId }))).map((e) => e.envelope);
  await rt.close();
  await bus.close();

  const wanted = logged.filter((e) => e.type === "tool.requested" || e.type === "agent.stopped");
  expect(wanted.filter((e) => e.type === "tool.requested")).toHaveLength(5);
  expect(new Set(wanted.filter((e) => e.type === "agent.stopped").map((e) => e.agentId)).size).toBe(3);
  const expected = wanted.map((e) => ({
    subject: names.event(e.runId, e.agentId, e.type),
    id: e.id,
  }));
  const byId = (seen: Seen[]) =>
    seen.map(({ subject, json }) => ({ subject, id: (json as { id: string }).id })).sort(idOrder);

  // Live: every one, each a single envelope (not an array of several) on its own subject.
  await waitFor("every typed event at the foreign subscriber", () => live.length >= expected.length);
  expect(live.every(({ json }) => !Array.isArray(json))).toBe(true);
  expect(byId(live)).toEqual([...expected].sort(idOrder));

  // Replayed: an ordered consumer of the event stream per type, as a foreign program would make one.
  const js = foreign.jetstream();
  for (const type of ["tool.requested", "agent.stopped"]) {
    const consumer = await js.consumers.get(names.eventStream, {
      filterSubjects: `${prefix}.evt.${handle.runId}.*.${type}`,
    });
    const replayed: Seen[] = [];
    const messages = await consumer.consume();
    for await (const msg of messages) {
      replayed.push(decode(msg));
      if (msg.info.pending === 0) break;
    }
    expect(byId(replayed)).toEqual(expected.filter((e) => e.subject.endsWith(`.${type}`)).sort(idOrder));
  }
});

const idOrder = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);
