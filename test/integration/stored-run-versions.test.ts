import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { JOURNAL_ENTRY_VERSION } from "../../src/actors/journal-entry.js";
import { Runtime } from "../../src/actors/runtime.js";
import { followRun } from "../../src/bus/follow-run.js";
import type { RunRecord } from "../../src/daemon/api.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { RecordCopies } from "../../src/daemon/record-copies.js";
import { RUN_RECORD_VERSION } from "../../src/daemon/run-record-migrations.js";
import type { Envelope } from "../../src/events/envelope.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { RecordSeal } from "../../src/trust/record-seal.js";
import { versionOf } from "../../src/util/record-versions.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { tempTree } from "../support/cli.js";
import { testConfig } from "../support/config.js";

/*
 * Every earlier version of the tool journal's entries and of the daemon's run records, as a daemon
 * left them in its buckets (test/fixtures/stored-runs/, with its seal key): each is put back, a
 * daemon with that key starts, and the run is followed to its end, as a user's stored run would be
 * after an upgrade.
 */
const FIXTURES = join(import.meta.dirname, "../fixtures/stored-runs");
const fixtures = readdirSync(FIXTURES, { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);

interface StoredRun {
  key: Buffer;
  runs: Record<string, { runId: string; agentId: string; v?: number }>;
  snapshots: Record<string, unknown>;
  journal: Record<string, { v?: number }>;
  events: Envelope[];
}

function storedRun(name: string): StoredRun {
  const read = (file: string) => JSON.parse(readFileSync(join(FIXTURES, name, file), "utf8"));
  return {
    key: Buffer.from(readFileSync(join(FIXTURES, name, "records.key"), "utf8").trim(), "base64"),
    runs: read("runs.json"),
    snapshots: read("snapshots.json"),
    journal: read("journal.json"),
    events: read("events.json"),
  };
}

let server: ScriptedModelServer;
let ws: string;
let copiesDir: string;
let dispose: () => void;
let under: BusUnderTest;
const closing: Array<() => Promise<void>> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start();
  ({ dir: ws, dispose } = tempTree({}));
  copiesDir = mkdtempSync(join(tmpdir(), "troupe-stored-runs-"));
  under = await natsBus();
});
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  await under.dispose();
  await server.close();
  dispose();
  rmSync(copiesDir, { recursive: true, force: true });
});

/** Puts the stored run back: its run record in the bucket (or junk there, `recordIn: "copy"`) and as the daemon's copy. */
async function putBack(stored: StoredRun, recordIn: "bucket" | "copy") {
  const copies = new RecordCopies(copiesDir);
  const runs = await under.bus.kv("runs");
  for (const [key, value] of Object.entries(stored.runs)) {
    copies.write(key, value);
    await runs.put(key, recordIn === "bucket" ? value : { stream: "P_EVENTS", seq: 9 });
  }
  for (const [key, value] of Object.entries(stored.snapshots))
    await (await under.bus.kv("snapshots")).put(key, value);
  for (const [key, value] of Object.entries(stored.journal))
    await (await under.bus.kv("journal")).put(key, value);
  await under.bus.eventLog.appendAll(stored.events);
  return copies;
}

async function startDaemon(stored: StoredRun, copies: RecordCopies): Promise<void> {
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "writer", description: "Writes.", tools: ["read_file", "write_file"] }],
  );
  const seal = new RecordSeal(stored.key);
  const runtime = await new Runtime({ config, bus: under.bus, workspace: ws, env: {}, seal }).open();
  const daemon = new Daemon(runtime, silentLogger, { seal, copies });
  closing.push(async () => {
    await daemon.stop();
    await runtime.close();
  });
  await daemon.start();
}

async function api<T>(verb: string, data: unknown): Promise<T> {
  const reply = await under.bus.request(
    under.bus.subjects.api(verb),
    makeEnvelope({ runId: "test", agentId: "test", seq: 0, type: verb, data }),
  );
  return reply.data as T;
}

/** The run's events from its start until its first agent stops. */
async function follow(runId: string, agentId: string): Promise<Envelope[]> {
  const seen: Envelope[] = [];
  for await (const envelope of followRun(under.bus, runId, { signal: AbortSignal.timeout(20_000) })) {
    seen.push(envelope);
    if (envelope.type === "agent.stopped" && envelope.agentId === agentId) break;
  }
  return seen;
}

describe("stored runs of earlier versions", () => {
  it("has a fixture of every version before the one this build writes, and of one without v", () => {
    const stored = fixtures.map(storedRun);
    const journal = stored.flatMap((run) => Object.values(run.journal));
    const runs = stored.flatMap((run) => Object.values(run.runs));
    for (let v = 1; v < JOURNAL_ENTRY_VERSION; v++)
      expect(journal.map(versionOf), `a journal entry of v${v}`).toContain(v);
    for (let v = 1; v < RUN_RECORD_VERSION; v++)
      expect(runs.map(versionOf), `a run record of v${v}`).toContain(v);
    expect(journal.some((entry) => entry.v === undefined)).toBe(true);
    expect(runs.some((record) => record.v === undefined)).toBe(true);
  });

  it.each(
    fixtures.flatMap(
      (name) =>
        [
          [name, "bucket"],
          [name, "copy"],
        ] as const,
    ),
  )(
    "%s (its run record in the %s) is resumed after a restart, its journal's write taken, and followed to the end",
    async (name, recordIn) => {
      const stored = storedRun(name);
      const [record] = Object.values(stored.runs);
      if (!record) throw new Error(`${name} has no run record`);
      const { runId, agentId } = record;
      const copies = await putBack(stored, recordIn);
      // The resumed agent has its write's result from the journal; its next turn answers.
      server.script({ match: { turn: 2 }, reply: { text: "wrote it" } });
      const following = follow(runId, agentId);
      await startDaemon(stored, copies);

      const events = await following;
      expect(events.map((e) => e.seq)).toEqual([...events.keys()]);
      expect(events.at(-1)).toMatchObject({
        type: "agent.stopped",
        data: { reason: "done", result: "wrote it" },
      });
      // Not written again: the fixture's write was done in another workspace, and the journal says so.
      expect(existsSync(join(ws, "notes.md"))).toBe(false);
      expect(server.requests).toHaveLength(1);
      expect(JSON.stringify(server.requests[0]?.body.messages.at(-1))).toContain("created notes.md");

      const listed = await api<{ runs: RunRecord[] }>("runs.list", {});
      expect(listed.runs.find((run) => run.runId === runId)).toMatchObject({
        agentId,
        status: "done",
        result: "wrote it",
      });
      // Written back at this version, in the bucket and the copy alike.
      const seal = new RecordSeal(stored.key);
      const written = (await (await under.bus.kv("runs")).get(runId))?.value;
      expect(seal.open(written)).toMatchObject({ v: RUN_RECORD_VERSION, status: "done" });
      expect(copies.read(runId)).toEqual(written);
    },
  );

  it("takes a journal entry of a version this build does not read as of unknown outcome, and leaves out a run record of one", async () => {
    const stored = storedRun(fixtures[0] as string);
    const seal = new RecordSeal(stored.key);
    const [[recordKey, record]] = Object.entries(stored.runs) as [[string, RunRecord]];
    const [[entryKey, entry]] = Object.entries(stored.journal) as [[string, Record<string, unknown>]];
    stored.journal[entryKey] = seal.sealAsWritten({ ...entry, v: 99 });
    server.script({ match: { turn: 2 }, reply: { text: "wrote it" } });
    const following = follow(record.runId, record.agentId);
    await startDaemon(stored, await putBack(stored, "bucket"));
    await following;
    // Not taken for done: a start of unknown outcome, and write_file may run twice, so it ran again.
    expect(readFileSync(join(ws, "notes.md"), "utf8")).toBe("hello\n");
    const rewritten = (await (await under.bus.kv("journal")).get(entryKey))?.value;
    expect(seal.openAsWritten(rewritten)).toMatchObject({ v: JOURNAL_ENTRY_VERSION, status: "finished" });

    // A run record of a later version: not listed, and left as it is.
    const later = seal.seal({ ...record, runId: "run-later", v: 99 });
    await (await under.bus.kv("runs")).put("run-later", later);
    const listed = await api<{ runs: RunRecord[] }>("runs.list", {});
    expect(listed.runs.map((run) => run.runId)).toEqual([recordKey]);
    expect(await (await under.bus.kv("runs")).get("run-later")).toMatchObject({ value: later });
  });
});
