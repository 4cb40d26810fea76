import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, inject, it } from "vitest";
import { z } from "zod";
import { ToolJournal } from "../../src/actors/agent-store.js";
import { JOURNAL_ENTRY_VERSION } from "../../src/actors/journal-entry.js";
import { Runtime } from "../../src/actors/runtime.js";
import type { Approver } from "../../src/approvals/approver.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { callKey, uniquePrefix } from "../../src/bus/subjects.js";
import type { ToolEffect } from "../../src/config/tool-catalog.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import type { JournaledOutcome } from "../../src/tools/call-outcome.js";
import type { PlannedCall } from "../../src/tools/plan.js";
import { runBatch } from "../../src/tools/run-batch.js";
import { defineTool, type Tool, ToolRegistry } from "../../src/tools/tool.js";
import { removePrefix } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/*
 * Every earlier version of a tool-journal entry, as Troupe wrote it, kept in test/fixtures/journal/
 * (`v<entry>-<what>.json`: the stored value, and what that build's model read of it): each is read
 * back as its call's outcome, the call is not run again, and the model reads the same text.
 */
const FIXTURES = join(import.meta.dirname, "../fixtures/journal");
const RECORDS = join(import.meta.dirname, "../fixtures/records");
const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith(".json"));

interface Fixture {
  runId: string;
  agentId: string;
  callId: string;
  stored: { name: string; effect: ToolEffect };
  content: string;
  answer?: string;
}
const fixture = (file: string) => JSON.parse(readFileSync(join(FIXTURES, file), "utf8")) as Fixture;

let bus: NatsBus;
const prefix = uniquePrefix();
beforeEach(async () => {
  bus = await NatsBus.connect({ url: inject("natsUrl"), prefix });
});
afterEach(async () => {
  await bus.close();
  await removePrefix(inject("natsUrl"), prefix);
});

async function store(entry: Fixture) {
  const kv = await bus.kv("journal");
  await kv.put(`${entry.runId}.${entry.agentId}.${callKey(entry.callId)}`, entry.stored);
}

describe("journal entries of earlier versions", () => {
  it("has a fixture of every version before this one", () => {
    const versions = new Set(fixtures.map((file) => Number(/^v(\d+)-/.exec(file)?.[1])));
    for (let v = 1; v < JOURNAL_ENTRY_VERSION; v++) expect(versions, `a fixture of v${v}`).toContain(v);
  });

  it.each(fixtures)("%s is read back as its call's outcome, and its call is not run again", async (file) => {
    const entry = fixture(file);
    await store(entry);
    const journal = await ToolJournal.open(bus);
    const read = await journal.get(entry.runId, entry.agentId, entry.callId);
    expect(read).toMatchObject({ status: "finished", name: entry.stored.name, effect: entry.stored.effect });
    expect(read?.outcome?.content).toBe(entry.content);
    expect(read?.outcome?.answer).toBe(entry.answer);

    let runs = 0;
    const registry = new ToolRegistry([
      defineTool({
        name: entry.stored.name,
        description: "Counts its runs.",
        effect: entry.stored.effect,
        parameters: z.object({}).loose(),
        execute: () => ({ ok: true, output: `run ${++runs}` }),
      }) as Tool,
    ]);
    const call: PlannedCall = {
      id: entry.callId,
      name: entry.stored.name,
      arguments: "{}",
      effect: entry.stored.effect,
      decision: "allow",
    };
    const results = await runBatch([call], {
      registry,
      context: { runId: entry.runId, agentId: entry.agentId, workspace: "/" },
      signal: new AbortController().signal,
      journal: journal.forAgent(entry.runId, entry.agentId, { fresh: false }),
    });
    expect(runs).toBe(0);
    expect(results[entry.callId]?.content).toBe(entry.content);
  });

  it("reads back what this build writes as it was written, with its version", async () => {
    const journal = await ToolJournal.open(bus);
    const outcome: JournaledOutcome = {
      content: '<tool_output source="finish">\nthe answer\n</tool_output>',
      answer: "the answer",
      details: { ok: true, summary: "answered", artifacts: ["a.md"], terminate: true },
    };
    await journal.finished("run-now", "a-now", "call_1_0", "finish", "execute", outcome);
    expect(await journal.get("run-now", "a-now", "call_1_0")).toEqual({
      status: "finished",
      name: "finish",
      effect: "execute",
      outcome,
    });
    const stored = await (await bus.kv("journal")).get<{ v: number }>(`run-now.a-now.${callKey("call_1_0")}`);
    expect(stored?.value.v).toBe(JOURNAL_ENTRY_VERSION);
  });
});

describe("a run resumed over a journal entry of an earlier version", () => {
  let server: ScriptedModelServer;
  let ws: string;
  let dispose: () => void;
  beforeEach(async () => {
    server = await ScriptedModelServer.start();
    ({ dir: ws, dispose } = tempTree({}));
  });
  afterEach(async () => {
    await server.close();
    dispose();
  });

  it("takes the finished write from the journal: not written again, its model told what it was told", async () => {
    // The record waits on the approval of its write_file; the journal says that write finished.
    const record = JSON.parse(readFileSync(join(RECORDS, "v1-machine2-awaiting-approval.json"), "utf8"));
    const entry = fixture("v1-write-finished.json");
    expect([entry.runId, entry.agentId]).toEqual([record.runId, record.agentId]);
    await (await bus.kv("snapshots")).put(`${record.runId}.${record.agentId}`, record);
    await store(entry);
    const config = testConfig(
      {
        defaultModel: "scripted",
        providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
      },
      [{ name: "coder", description: "Writes.", tools: ["write_file", "read_file"] }],
    );
    const approving: Approver = { decide: async () => ({ approved: true, by: "test" }) };
    const runtime = await new Runtime({ config, workspace: ws, env: {}, bus, approver: approving }).open();
    try {
      server.script({ match: { turn: 2 }, reply: { text: "wrote it" } });
      const handle = await runtime.resume(record.runId, record.agentId, { as: "own-record" });
      expect((await handle?.done)?.result).toBe("wrote it");
      expect(existsSync(join(ws, "notes.md"))).toBe(false);
      const told = server.requests.at(-1)?.body.messages.filter((m) => m.role === "tool");
      expect(told?.map((m) => m.content)).toEqual([entry.content]);
    } finally {
      await runtime.close();
    }
  });
});
