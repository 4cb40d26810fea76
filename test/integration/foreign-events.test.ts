// Events another program put on a run: one whose data does not fit its type, one of a type this build
// does not know. A reader in another process follows the run as `troupe run` does (followRun), builds
// its tree and shows it; the bad one is left out with one warning line, the unknown one passed on.
import { connect, type NatsConnection } from "nats";
import { afterEach, beforeEach, expect, inject, it } from "vitest";
import { buildRunTree } from "../../src/actors/run-tree.js";
import { FileStore } from "../../src/bus/file-store.js";
import { followRun } from "../../src/bus/follow-run.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { subjects, uniquePrefix } from "../../src/bus/subjects.js";
import { eventsOf } from "../../src/cli/history.js";
import { humanRenderer } from "../../src/cli/render.js";
import type { Envelope } from "../../src/events/envelope.js";
import { memoryLogger } from "../../src/log.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";

const url = () => inject("natsUrl");
const prefix = uniquePrefix();
let foreign: NatsConnection;
let bus: NatsBus;
let logs: Array<Record<string, unknown>>;
beforeEach(async () => {
  const memory = memoryLogger("warn");
  logs = memory.records;
  bus = await NatsBus.connect({ url: url(), prefix, log: memory.log });
  foreign = await connect({ servers: url() });
});
afterEach(async () => {
  await foreign.close();
  await bus.close();
  await removePrefix(url(), prefix);
});

const usage = { inputTokens: 10, outputTokens: 2, cachedInputTokens: 0, costUsd: 0 };
const runId = "run-foreign";

/** The envelopes, as the foreign program writes them into the event log. */
function written(): Array<{ type: string; data: unknown }> {
  return [
    { type: "agent.started", data: { name: "lead", model: "m", task: "look", budget: {}, depth: 0 } },
    // Its arguments are not the JSON text of them: a reader that took it on trust would fail on it.
    {
      type: "tool.requested",
      data: { callId: "c1", name: "planted_tool", arguments: 42, effect: "read", decision: "allow" },
    },
    { type: "tool.frobbed", data: { anything: ["a newer build's event"] } },
    {
      type: "tool.requested",
      data: {
        callId: "c2",
        name: "read_file",
        arguments: '{"path":"a.md"}',
        effect: "read",
        decision: "allow",
      },
    },
    {
      type: "agent.stopped",
      data: { reason: "done", result: "ok", usage, turns: 1, toolCalls: 1, total: { usage, toolCalls: 1 } },
    },
  ];
}

it("a follower of a run skips an event whose data does not fit its type, with one warning line, passes an unknown type on, and shows the rest", async () => {
  const names = subjects(prefix);
  const js = foreign.jetstream();
  for (const [seq, { type, data }] of written().entries()) {
    const envelope = { v: 1, id: `01FOREIGN${seq}`, ts: 1000 + seq, runId, agentId: "lead", seq, type, data };
    await js.publish(names.event(runId, "lead", type), new TextEncoder().encode(JSON.stringify(envelope)));
  }

  const events: Envelope[] = [];
  for await (const envelope of followRun(bus, runId, { quietMs: 200 })) {
    events.push(envelope);
    if (envelope.type === "agent.stopped") break;
  }
  expect(events.map((e) => `${e.seq} ${e.type}`)).toEqual([
    "0 agent.started",
    "2 tool.frobbed",
    "3 tool.requested",
    "4 agent.stopped",
  ]);
  const dropped = logs.filter((r) => r.msg === "dropped an event whose data does not fit its type");
  expect(dropped).toEqual([
    expect.objectContaining({
      level: 40,
      type: "tool.requested",
      runId,
      agentId: "lead",
      seq: 1,
      why: expect.stringContaining("data.arguments"),
    }),
  ]);

  const [root] = buildRunTree(events);
  expect(root).toMatchObject({ agentId: "lead", name: "lead", reason: "done", toolCalls: 1, turns: 1 });

  const out = sink();
  const err = sink();
  const renderer = humanRenderer(() => "lead", out.stream, err.stream, false);
  for (const envelope of events) renderer.event({ envelope });
  renderer.close();
  expect(out.text()).toBe('▸ read_file {"path":"a.md"}\n');
  expect(err.text()).toContain("✓ done");
});

/** A local run's store with the foreign program's events in it, and a line that is no envelope. */
function plantedStore(dir: string): FileStore {
  const store = new FileStore(dir);
  for (const [seq, { type, data }] of written().entries())
    store.appendEvent(
      runId,
      JSON.stringify({ v: 1, id: `01LOCAL${seq}`, ts: seq, runId, agentId: "lead", seq, type, data }),
    );
  store.appendEvent(runId, "not an envelope");
  return store;
}

it("a local run's stored events are checked as the bus checks them: troupe replay, runs, inspect and resume read what fits", () => {
  const { dir, dispose } = tempTree({});
  try {
    const store = plantedStore(dir);
    const memory = memoryLogger("warn");
    const events = eventsOf(store, runId, memory.log) ?? [];
    expect(events.map((e) => `${e.seq} ${e.type}`)).toEqual([
      "0 agent.started",
      "2 tool.frobbed",
      "3 tool.requested",
      "4 agent.stopped",
    ]);
    expect(memory.records.map((r) => [r.msg, r.seq])).toEqual([
      ["dropped an event whose data does not fit its type", 1],
      ["dropped a malformed envelope", undefined],
    ]);
  } finally {
    dispose();
  }
});

it("a local bus reading a run's store (a local run resumed or followed) leaves out the same events", async () => {
  const { dir, dispose } = tempTree({});
  try {
    const store = plantedStore(dir);
    const memory = memoryLogger("warn");
    const local = new LocalBus({ prefix: uniquePrefix(), log: memory.log, store });
    try {
      const read: string[] = [];
      for await (const { envelope } of local.eventLog.read({ runId }))
        read.push(`${envelope.seq} ${envelope.type}`);
      expect(read).toEqual(["0 agent.started", "2 tool.frobbed", "3 tool.requested", "4 agent.stopped"]);
      expect(memory.records.map((r) => [r.msg, r.seq])).toEqual([
        ["dropped an event whose data does not fit its type", 1],
        ["dropped a malformed envelope", undefined],
      ]);
    } finally {
      await local.close();
    }
  } finally {
    dispose();
  }
});

/** A stream, not a terminal, that keeps what is written to it. */
function sink() {
  let written = "";
  const stream = {
    isTTY: false,
    write: (text: string) => {
      written += text;
      return true;
    },
  } as unknown as typeof process.stdout & typeof process.stderr;
  return { stream, text: () => written };
}
