import { afterEach, expect, it } from "vitest";
import { ToolJournal } from "../../src/actors/agent-store.js";
import { JOURNAL_ENTRY_VERSION, JOURNAL_MIGRATIONS } from "../../src/actors/journal-entry.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { RecordSeal } from "../../src/trust/record-seal.js";

const buses: LocalBus[] = [];
afterEach(async () => {
  for (const bus of buses.splice(0)) await bus.close();
});

async function journal() {
  const bus = new LocalBus();
  buses.push(bus);
  const seal = RecordSeal.ephemeral();
  return { kv: await bus.kv("journal"), journal: await ToolJournal.open(bus, seal), seal };
}

const outcome = { content: "<tool_output>written</tool_output>", details: { ok: true } };
const finished = { status: "finished", name: "write_file", effect: "write", outcome };
const unknown = { status: "started", name: "?", effect: "execute" };

it("writes each entry with its version, sealed as written, and reads it back", async () => {
  const { kv, journal: j, seal } = await journal();
  await j.finished("r", "a", "c1", "write_file", "write", outcome);
  const stored = (await kv.get("r.a.c1"))?.value;
  expect(seal.openAsWritten(stored)).toMatchObject({ v: JOURNAL_ENTRY_VERSION, status: "finished" });
  expect(await j.get("r", "a", "c1")).toEqual(finished);
});

it("reads an entry of each earlier version through the listed steps, a start as a start", async () => {
  expect(JOURNAL_MIGRATIONS.map(({ from, to }) => [from, to])).toEqual([[1, 2]]);
  const { kv, journal: j, seal } = await journal();
  await kv.put("r.a.c1", seal.sealAsWritten({ status: "started", name: "shell", effect: "execute" }));
  expect(await j.get("r", "a", "c1")).toEqual({ status: "started", name: "shell", effect: "execute" });
});

it("takes an entry of a version this build does not read as a start of unknown outcome", async () => {
  const { kv, journal: j, seal } = await journal();
  await kv.put("r.a.c1", seal.sealAsWritten({ v: JOURNAL_ENTRY_VERSION + 1, ...finished }));
  expect(await j.get("r", "a", "c1")).toEqual(unknown);
});

it("checks the seal on the entry as stored, before its version: a version changed under the seal is no entry", async () => {
  const { kv, journal: j } = await journal();
  await j.finished("r", "a", "c1", "write_file", "write", outcome);
  const stored = (await kv.get<Record<string, unknown>>("r.a.c1"))?.value;
  const { v: _v, ...unversioned } = stored ?? {};
  await kv.put("r.a.c1", unversioned);
  expect(await j.get("r", "a", "c1")).toEqual(unknown);
});
