import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import type { LoggedEvent } from "../../src/bus/bus.js";
import { NatsServerProcess } from "../../src/bus/embedded-nats.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniquePrefix } from "../../src/bus/subjects.js";
import { type Envelope, makeEnvelope } from "../../src/events/envelope.js";
import { collect, waitFor } from "../support/wait.js";

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("survives nats-server killed with SIGKILL and restarted under a live connection", async () => {
  const storeDir = mkdtempSync(join(tmpdir(), "troupe-fault-nats-"));
  let server = await NatsServerProcess.start({ storeDir });
  cleanups.push(async () => {
    await server.stop();
    rmSync(storeDir, { recursive: true, force: true });
  });
  const bus = await NatsBus.connect({ url: server.url, prefix: uniquePrefix(), appendTimeoutMs: 20_000 });
  cleanups.push(() => bus.close());

  // An observer attached before the crash, following the run live throughout.
  const watching = new AbortController();
  const observed: Envelope[] = [];
  const observer = (async () => {
    for await (const e of bus.eventLog.read({ runId: "crash", follow: true, signal: watching.signal })) {
      observed.push(e.envelope);
    }
  })();

  // A person's observer, reading by gets: at the log's end it takes what it hears as it is published.
  const people = await NatsBus.connect({ url: server.url, prefix: bus.subjects.prefix, role: "observer" });
  cleanups.push(() => people.close());
  const byGets: LoggedEvent[] = [];
  const follower = (async () => {
    for await (const e of people.eventLog.read({ runId: "crash", follow: true, signal: watching.signal }))
      byGets.push(e);
  })();

  // One producer appends in order and remembers what the log acknowledged.
  const acked: Envelope[] = [];
  let seq = 0;
  let producing = true;
  const producer = (async () => {
    while (producing) {
      const envelope = makeEnvelope({
        runId: "crash",
        agentId: "a",
        seq: seq++,
        type: "tick",
        data: { n: seq },
      });
      await bus.eventLog.append(envelope);
      acked.push(envelope);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();

  await waitFor("100 events before the crash", () => acked.length >= 100, 10_000);
  // Up to the crash the person's observer hears the events rather than asking for them.
  await waitFor("the person's observer to take events as they come", () =>
    byGets.some((e) => e.seq === undefined),
  );
  const beforeCrash = acked.length;
  const oldPid = server.pid;
  await server.kill("SIGKILL");
  await new Promise((resolve) => setTimeout(resolve, 300));
  server = await server.restart();
  expect(server.pid).not.toBe(oldPid);

  await waitFor("100 more events after the restart", () => acked.length >= beforeCrash + 100, 20_000);
  producing = false;
  await producer;

  // Core publish/subscribe works again on the same connection.
  const pings: number[] = [];
  bus.subscribe(bus.subjects.event("crash", "b", "ping"), (e) => void pings.push(e.seq));
  await bus.flush();
  bus.publish(
    bus.subjects.event("crash", "b", "ping"),
    makeEnvelope({ runId: "crash", agentId: "b", seq: 0, type: "ping", data: null }),
  );
  await waitFor("a core message after the restart", () => pings.length === 1);

  // Nothing acknowledged was lost, nothing is stored twice, and the order holds.
  const replayed = (await collect(bus.eventLog.read({ runId: "crash" })))
    .map((e) => e.envelope)
    .filter((e) => e.agentId === "a");
  expect(replayed.map((e) => e.id)).toEqual(acked.map((e) => e.id));

  // The observer that was attached throughout saw every event, without a gap.
  await waitFor(
    "the observer to catch up",
    () => observed.filter((e) => e.agentId === "a").length >= acked.length,
    10_000,
  );
  const byGetsOfA = () => byGets.filter((e) => e.envelope.agentId === "a");
  await waitFor("the person's observer to catch up", () => byGetsOfA().length >= acked.length, 10_000);
  watching.abort();
  await observer;
  await follower;
  expect(observed.filter((e) => e.agentId === "a").map((e) => e.seq)).toEqual(acked.map((e) => e.seq));
  // It lost its connection with the server: what came meanwhile and after was read from the log
  // (placed), until it heard events again; and it has every one, once, in order.
  expect(byGetsOfA().map((e) => e.envelope.seq)).toEqual(acked.map((e) => e.seq));
  const afterCrash = byGetsOfA().slice(beforeCrash);
  expect(afterCrash.some((e) => e.seq !== undefined)).toBe(true);

  // KV works again too.
  const kv = await bus.kv("snapshots");
  const revision = await kv.create("after-restart", { ok: true });
  expect(await kv.get("after-restart")).toMatchObject({ revision, value: { ok: true } });
}, 90_000);
