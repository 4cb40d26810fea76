import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { PLACEMENT_VERSION } from "../../src/actors/placement-migrations.js";
import { Runtime } from "../../src/actors/runtime.js";
import { Worker } from "../../src/actors/worker.js";
import { silentLogger } from "../../src/log.js";
import { ScriptedModelServer } from "../../src/testing/scripted-model-server.js";
import { versionOf } from "../../src/util/record-versions.js";
import { type BusUnderTest, natsBus } from "../support/buses.js";
import { testConfig } from "../support/config.js";
import { collect, waitFor } from "../support/wait.js";

/*
 * Every earlier version of a placement, as a worker wrote it in the bucket `actors`
 * (test/fixtures/placements/): each is found by a worker of this build once its worker's heartbeat
 * stops, taken over and run to the end.
 */
const FIXTURES = join(import.meta.dirname, "../fixtures/placements");
const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith(".json"));

interface StoredPlacement {
  key: string;
  value: { v?: number; worker: string; spawn: { runId: string; childId: string } };
}
const stored = (file: string): StoredPlacement => JSON.parse(readFileSync(join(FIXTURES, file), "utf8"));

let server: ScriptedModelServer;
let under: BusUnderTest;
const closing: Array<() => Promise<void>> = [];
beforeEach(async () => {
  server = await ScriptedModelServer.start([{ reply: { text: "scouted" } }]);
  under = await natsBus();
});
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
  await under.dispose();
  await server.close();
});

/** The placement put back under its key, its worker's last heartbeat beside it, and a worker of this build started. */
async function putBack(placement: StoredPlacement) {
  const { bus } = under;
  await (await bus.kv("workers")).put(placement.value.worker, { pid: 1, host: "gone", beats: 7 });
  await (await bus.kv("actors")).put(placement.key, placement.value);
  const config = testConfig(
    {
      defaultModel: "scripted",
      providers: { openai: { baseURL: server.baseURL, models: { scripted: {} } } },
    },
    [{ name: "scout", description: "Scouts.", readOnly: true, tools: ["read_file"] }],
  );
  const runtime = await new Runtime({ config, bus, workspace: process.cwd(), env: {} }).open();
  const worker = new Worker(runtime, silentLogger, { heartbeatMs: 100, deadAfterMs: 300 });
  closing.push(async () => {
    await worker.stop();
    await runtime.close();
  });
  await worker.start();
}

describe("placements of earlier versions", () => {
  it("has a fixture of every version before the one this build writes, and of one without v", () => {
    const values = fixtures.map((file) => stored(file).value);
    for (let v = 1; v < PLACEMENT_VERSION; v++)
      expect(values.map(versionOf), `a placement of v${v}`).toContain(v);
    expect(values.some((value) => value.v === undefined)).toBe(true);
  });

  it.each(fixtures)("%s is taken over from its dead worker and its agent run to the end", async (file) => {
    const placement = stored(file);
    const { runId, childId } = placement.value.spawn;
    await putBack(placement);
    await waitFor(
      "the child to stop",
      async () =>
        (await collect(under.bus.eventLog.read({ runId }))).some(
          ({ envelope }) => envelope.agentId === childId && envelope.type === "agent.stopped",
        ),
      10_000,
    );
    const last = (await collect(under.bus.eventLog.read({ runId }))).at(-1)?.envelope;
    expect(last).toMatchObject({ type: "agent.stopped", data: { reason: "done", result: "scouted" } });
  });

  it("one of a version this build does not read is left to a worker that reads it", async () => {
    const placement = stored(fixtures[0] as string);
    const newer = { ...placement, value: { ...placement.value, v: 99 } };
    await putBack(newer);
    // Long enough for its worker to be found dead (300 ms) and its actors looked at, several times.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await (await under.bus.kv("actors")).get(placement.key))?.value).toEqual(newer.value);
    expect(server.requests).toHaveLength(0);
  });
});
