import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { IncompatibleRecordError } from "../../src/actors/agent-store.js";
import { AGENT_RECORD_VERSION, RECORD_MIGRATIONS } from "../../src/actors/record-migrations.js";
import { Runtime } from "../../src/actors/runtime.js";
import type { Approver } from "../../src/approvals/approver.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { AGENT_MACHINE_VERSION } from "../../src/machines/agent-machine.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/*
 * Every earlier version of an agent's stored record, as Troupe wrote it, kept in
 * test/fixtures/records/ (`v<record>-machine<machine>-<what>.json`): each is migrated and resumed
 * to the end on a real server, as a user's stored run would be after an upgrade.
 */
const FIXTURES = join(import.meta.dirname, "../fixtures/records");
const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith(".json"));
const versionOf = (file: string) => {
  const [, v, machine] = /^v(\d+)-machine(\d+)-/.exec(file) ?? [];
  return { v: Number(v), machine: Number(machine) };
};

let server: ScriptedModelServer;
let ws: string;
let dispose: () => void;
let bus: NatsBus;
let runtime: Runtime;
const prefix = uniquePrefix();
const approving: Approver = { decide: async () => ({ approved: true, by: "test" }) };

beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({}));
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "coder", description: "Writes.", tools: ["write_file", "read_file"] }],
  );
  bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
  runtime = await new Runtime({ config, workspace: ws, env: {}, bus, approver: approving }).open();
});
afterEach(async () => {
  await runtime.close();
  await bus.close();
  await server.close();
  dispose();
  await removePrefix(inject("natsUrl"), prefix);
});

async function store(record: Record<string, unknown>) {
  const kv = await bus.kv("snapshots");
  await kv.put(`${record.runId}.${record.agentId}`, record);
}

describe("stored records of earlier versions", () => {
  it("has a fixture for every version a migration starts from", () => {
    const have = fixtures.map(versionOf);
    for (const { from } of RECORD_MIGRATIONS)
      expect(have, `a fixture of v${from.v}/machine ${from.machine}`).toContainEqual(from);
    expect(fixtures.length).toBeGreaterThan(0);
  });

  it.each(fixtures)("%s is migrated, resumed where it was, and goes on to the end", async (file) => {
    const record = JSON.parse(readFileSync(join(FIXTURES, file), "utf8"));
    expect(record.machineVersion).toBeLessThan(AGENT_MACHINE_VERSION);
    await store(record);
    // Stored while it waited on its write_file: approved now, it writes, then answers.
    server.script({ match: { turn: 2 }, reply: { text: "wrote it" } });
    const handle = await runtime.resume(record.runId, record.agentId, { as: "own-record" });
    expect(handle).toBeDefined();
    const output = await handle?.done;
    expect(output?.reason).toBe("done");
    expect(output?.result).toBe("wrote it");
    expect(readFileSync(join(ws, "notes.md"), "utf8")).toBe("hello\n");
    // Written back at this version, with what the older one left to a default now in its context.
    type Stored = {
      v: number;
      machineVersion: number;
      snapshot: { context: Record<string, unknown> & { onToolError: string; waitedMs: number } };
    };
    const key = `${record.runId}.${record.agentId}`;
    const stored = (await (await bus.kv("snapshots")).get<Stored>(key))?.value as Stored;
    expect(stored.v).toBe(AGENT_RECORD_VERSION);
    expect(stored.machineVersion).toBe(AGENT_MACHINE_VERSION);
    expect(stored.snapshot.context.onToolError).toBe("continue");
    expect(stored.snapshot.context.waitedMs).toEqual(expect.any(Number));
    // In this version's shape: the fields grouped, none of the older ones left beside them.
    expect(stored.snapshot.context.unread).toEqual({ steering: [], followUps: [] });
    expect(stored.snapshot.context.loop).toEqual({ recentCalls: [], nudged: false });
    for (const gone of ["steering", "followUps", "recentCalls", "nudgedForLoop", "limit", "elapsedMs"])
      expect(stored.snapshot.context).not.toHaveProperty(gone);
  });

  it("refuses a record of a version no migration starts from, in one line, and runs nothing", async () => {
    const file = fixtures[0] as string;
    const record = { ...JSON.parse(readFileSync(join(FIXTURES, file), "utf8")), machineVersion: 99 };
    await store(record);
    // Not readable, and no event log to rebuild it from (a stored record alone): refused.
    const error = await runtime.resume(record.runId, record.agentId, { as: "own-record" }).catch((e) => e);
    expect(error).toBeInstanceOf(IncompatibleRecordError);
    expect(error.message).toMatch(
      /another version of Troupe \(record v1, machine v99; this one reads v1\/v5/,
    );
    expect(error.message).not.toMatch(/\n/);
    expect(server.requests).toHaveLength(0);
  });
});
