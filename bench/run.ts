/**
 * `npm run bench [-- --quick]`: measures what the built pieces cost, with medians over repetitions,
 * and writes bench/results.json and docs/bench.md. Not a test: CI doesn't run it.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Bus } from "../src/bus/bus.js";
import { answersNats, NatsServerProcess } from "../src/bus/embedded-nats.js";
import { LocalBus } from "../src/bus/local-bus.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { uniquePrefix } from "../src/bus/subjects.js";
import { makeEnvelope } from "../src/events/envelope.js";
import { measureActiveApart } from "./active.js";
import { measureFanout } from "./fanout.js";
import { measureIdleApart } from "./idle.js";
import { measureOverhead, writesPerRun } from "./overhead.js";
import { stopChild } from "./processes.js";
import { measureReadFile } from "./read-file.js";
import { measureRecovery, type Recovery } from "./recovery.js";
import { format, formatWritten, median, sectionsOf } from "./report.js";
import { measureSandboxApart, sandboxRows } from "./sandbox.js";
import { measureScaleApart } from "./scale.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const quick = process.argv.includes("--quick");
/** The CLI as bin/troupe.js runs it, compiled with the bench (bench/troupe-bin.ts). */
const troupeBin = fileURLToPath(new URL("./troupe-bin.js", import.meta.url));
const reps = quick ? 3 : 7;

interface Row {
  name: string;
  value: number;
  unit: string;
  target?: string;
}
const rows: Row[] = [];
const benchStarted = performance.now();

/** A row of the table, also said on stderr as it is measured. */
function add(row: Row): void {
  rows.push(row);
  const seconds = ((performance.now() - benchStarted) / 1000).toFixed(1);
  process.stderr.write(`${seconds.padStart(5)} s  ${row.name}: ${format(row.value)} ${row.unit}\n`);
}

async function repeat(fn: () => Promise<number> | number): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < reps; i++) values.push(await fn());
  return median(values);
}

function coldStart(): number {
  const started = process.hrtime.bigint();
  const result = spawnSync(process.execPath, [troupeBin, "--help"], { stdio: "ignore" });
  if (result.status !== 0) throw new Error("troupe --help failed");
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** Milliseconds from spawning `troupe daemon` to its "ready" line: connected, streams and buckets made. */
async function daemonReady(url: string, prefix: string): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-daemon-"));
  mkdirSync(join(dir, "config/agents"), { recursive: true });
  writeFileSync(join(dir, "config/troupe.yaml"), `nats:\n  prefix: ${prefix}\ndefaultAgent: worker\n`);
  writeFileSync(join(dir, "config/agents/worker.yaml"), "name: worker\ndescription: Works.\n");
  const started = process.hrtime.bigint();
  const daemon = spawn(process.execPath, [troupeBin, "--config", join(dir, "config"), "daemon"], {
    cwd: dir,
    env: { ...process.env, NATS_URL: url, TROUPE_DATA_DIR: join(dir, ".data") },
    stdio: ["ignore", "ignore", "pipe"],
  });
  try {
    return await new Promise<number>((ready, fail) => {
      let stderr = "";
      daemon.stderr?.on("data", (chunk) => {
        stderr += chunk;
        if (stderr.includes("troupe daemon ready")) ready(Number(process.hrtime.bigint() - started) / 1e6);
      });
      daemon.once("exit", (code) => fail(new Error(`troupe daemon exited (${code}): ${stderr.trim()}`)));
    });
  } finally {
    await stopChild(daemon);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function appendRate(bus: Bus, count: number): Promise<number> {
  const runId = `bench${Math.random().toString(36).slice(2, 8)}`;
  const started = performance.now();
  const window = 64;
  for (let start = 0; start < count; start += window) {
    const batch: Array<Promise<unknown>> = [];
    for (let seq = start; seq < Math.min(count, start + window); seq++) {
      batch.push(
        bus.eventLog.append(
          makeEnvelope({ runId, agentId: "a", seq, type: "model.delta", data: { text: "hello" } }),
        ),
      );
    }
    await Promise.all(batch);
  }
  const appendSeconds = (performance.now() - started) / 1000;
  return count / appendSeconds;
}

/** A run of `count` events appended on `bus`, read back on `reader` (the same bus unless given). */
async function replayRate(bus: Bus, count: number, reader: Bus = bus): Promise<number> {
  const runId = `bench${Math.random().toString(36).slice(2, 8)}`;
  await Promise.all(
    Array.from({ length: count }, (_, seq) =>
      bus.eventLog.append(
        makeEnvelope({ runId, agentId: "a", seq, type: "model.delta", data: { text: "hello" } }),
      ),
    ),
  );
  const started = performance.now();
  let seen = 0;
  for await (const _ of reader.eventLog.read({ runId })) seen++;
  if (seen !== count) throw new Error(`replayed ${seen} of ${count}`);
  return count / ((performance.now() - started) / 1000);
}

async function pubSubRate(bus: Bus, count: number): Promise<number> {
  const subject = bus.subjects.event("pubsub", "a", "tick");
  let received = 0;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  const sub = bus.subscribe(subject, () => {
    if (++received === count) done();
  });
  await bus.flush();
  const envelope = makeEnvelope({
    runId: "pubsub",
    agentId: "a",
    seq: 0,
    type: "tick",
    data: { text: "hello" },
  });
  const started = performance.now();
  for (let i = 0; i < count; i++) bus.publish(subject, envelope);
  await finished;
  const rate = count / ((performance.now() - started) / 1000);
  sub.unsubscribe();
  return rate;
}

async function measureBus(
  label: string,
  open: () => Promise<Bus>,
  openReader?: () => Promise<Bus>,
): Promise<void> {
  const bus = await open();
  const n = quick ? 2000 : 10_000;
  try {
    if (openReader) {
      const reader = await openReader();
      try {
        add({
          name: `${label}: eventLog.read replay by a person's role (the stream's gets; no consumer)`,
          value: await repeat(() => replayRate(bus, n, reader)),
          unit: "events/s",
          target: "≥ 150,000",
        });
      } finally {
        await reader.close();
      }
    }
    add({
      name: `${label}: eventLog.append (64 in flight)`,
      value: await repeat(() => appendRate(bus, n)),
      unit: "events/s",
    });
    add({
      name: `${label}: eventLog.read replay`,
      value: await repeat(() => replayRate(bus, n)),
      unit: "events/s",
      ...(openReader ? { target: "≥ 150,000" } : {}),
    });
    add({
      name: `${label}: publish → subscribe`,
      value: await repeat(() => pubSubRate(bus, n * 5)),
      unit: "msgs/s",
    });
  } finally {
    await bus.close();
  }
}

async function main(): Promise<void> {
  add({
    name: "troupe --help (cold start)",
    value: await repeat(coldStart),
    unit: "ms",
    target: "≤ 300 ms",
  });
  await measureBus("LocalBus", async () => new LocalBus({ prefix: uniquePrefix("bench") }));
  // The sandbox needs no bus, and a fresh process: what a fork costs grows with the forking one.
  for (const row of sandboxRows(await measureSandboxApart(quick ? 30 : 200, quick ? 3 : 10))) add(row);
  const readFile = await measureReadFile(reps);
  add({
    name: `read_file: line 2,000,000 of a ${readFile.megabytes} MB file, first read (its line index made)`,
    value: readFile.coldMs,
    unit: "ms",
    target: "< 1 s",
  });
  add({ name: "read_file: the same line again (the index reused)", value: readFile.warmMs, unit: "ms" });

  let server: NatsServerProcess | undefined;
  let store: string | undefined;
  let url = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
  if (!process.env.NATS_URL && !(await answersNats("127.0.0.1", 4222))) {
    store = mkdtempSync(join(tmpdir(), "troupe-bench-nats-"));
    server = await NatsServerProcess.start({ storeDir: store });
    url = server.url;
  }
  const prefix = uniquePrefix("bench");
  const durablePrefix = uniquePrefix("benchd");
  // The durable floor's request is no verb of the daemon's: on a prefix of its own.
  const floorPrefix = uniquePrefix("bfloor");
  const daemonPrefix = uniquePrefix("bd");
  const recoveryPrefix = uniquePrefix("br");
  const scalePrefix = uniquePrefix("bs");
  const idlePrefix = uniquePrefix("bi");
  const activePrefix = uniquePrefix("ba");
  const fanoutPrefix = uniquePrefix("bf");
  try {
    await measureBus(
      "NatsBus",
      () => NatsBus.connect({ url, prefix }),
      () => NatsBus.connect({ url, prefix, role: "observer" }),
    );
    const overhead = await measureOverhead(quick ? 40 : 200, url, durablePrefix, floorPrefix);
    for (const result of overhead)
      add({ name: `turn overhead, ${result.name}`, value: result.perTurnMs, unit: "ms/turn" });
    const [a, b, c, d, inProcess, floor, clientApart, secured, traced] = overhead.map(
      (result) => result.perTurnMs,
    ) as [number, number, number, number, number, number, number, number, number];
    add({
      name: "c‡ − c: what telemetry on adds to a turn (spans and metrics, exported)",
      value: traced - c,
      unit: "ms/turn",
    });
    add({
      name: "ratio c/b (Troupe local vs @openai/agents)",
      value: c / b,
      unit: "",
      target: "≤ 0.6",
    });
    add({
      name: "c − a: what Troupe local adds to the SDK loop",
      value: c - a,
      unit: "ms/turn",
      target: "≤ 0.6 ms",
    });
    add({
      name: "ratio d/b (Troupe on NATS, durable vs @openai/agents)",
      value: d / b,
      unit: "",
      target: "≤ 1.1",
    });
    add({
      name: "ratio d‴/b (d on the default server: TLS, two accounts, vs @openai/agents)",
      value: secured / b,
      unit: "",
      target: "≤ d/b + 0.1",
    });
    add({
      name: "what the default server adds to d/b (d‴/b − d/b)",
      value: (secured - d) / b,
      unit: "",
      target: "≤ 0.1",
    });
    add({ name: "ratio c/a (Troupe local vs the raw SDK loop)", value: c / a, unit: "" });
    const writes = await writesPerRun(url, durablePrefix);
    add({
      name: "messages a two-turn run appends to the event log (each event its own)",
      value: writes.events,
      unit: "",
      target: "≤ 8",
    });
    add({
      name: "writes a two-turn run makes to the buckets (snapshots, run record)",
      value: writes.kvWrites,
      unit: "",
    });
    add({
      name: "ratio d′/b (the daemon's runtime alone vs @openai/agents)",
      value: inProcess / b,
      unit: "",
    });
    add({ name: "ratio e/b (the durable floor vs @openai/agents)", value: floor / b, unit: "" });
    add({
      name: "ratio d″/b (d with its client in a process of its own vs @openai/agents)",
      value: clientApart / b,
      unit: "",
    });
    // Both sit on the same SDK loop (a): what each adds on top of it.
    add({
      name: "added to the SDK loop: (c − a) / (b − a), Troupe local vs @openai/agents",
      value: (c - a) / (b - a),
      unit: "",
    });
    add({
      name: "troupe daemon, spawn to ready",
      value: await repeat(() => daemonReady(url, daemonPrefix)),
      unit: "ms",
    });
    const recoveries: Recovery[] = [];
    await repeat(async () => {
      recoveries.push(await measureRecovery(troupeBin, url, recoveryPrefix));
      return 0;
    });
    add({
      name: "recovery: kill -9 of the daemon → next event of the resumed run",
      value: median(recoveries.map((r) => r.fromKillMs)),
      unit: "ms",
      target: "≤ 1 s",
    });
    add({
      name: "recovery: new daemon ready → next event of the resumed run",
      value: median(recoveries.map((r) => r.fromReadyMs)),
      unit: "ms",
    });
    // Once, in a process of its own: a thousand agents is a run of its own, and RSS only grows.
    const scale = await measureScaleApart("troupe", 1000, url, scalePrefix);
    if (scale.finished !== scale.agents)
      throw new Error(`scale: only ${scale.finished} of ${scale.agents} agents finished their three turns`);
    add({
      name: "scale: 1,000 subagents × 3 turns (10 leads × 100) on NATS, wall time",
      value: scale.wallMs,
      unit: "ms",
    });
    add({
      name: "scale: peak RSS growth per active agent",
      value: scale.rssPerAgentKb,
      unit: "KB",
      target: "≤ 200 KB",
    });
    if (!quick) {
      // The same thousand runs, measured the same way, on the peer and on the bare SDK loop.
      for (const [kind, who] of [
        ["peer", "@openai/agents"],
        ["sdk", "the raw openai SDK loop"],
      ] as const) {
        const beside = await measureScaleApart(kind, 1000, url, scalePrefix);
        add({ name: `scale, ${who}: 1,000 runs × 3 turns, wall time`, value: beside.wallMs, unit: "ms" });
        add({ name: `scale, ${who}: peak RSS growth per run`, value: beside.rssPerAgentKb, unit: "KB" });
      }
      // The floor beside Troupe: what bare SDK streams cost open, measured the same way.
      const active = await measureActiveApart("troupe", 1000, url, activePrefix);
      const floor = await measureActiveApart("sdk", 1000, url, activePrefix);
      for (const [who, result] of [
        ["1,000 agents inside a model call on NATS", active],
        ["1,000 bare openai SDK streams open (the floor)", floor],
      ] as const) {
        add({ name: `active, ${who}: RSS per agent after a GC`, value: result.rssPerAgentKb, unit: "KB" });
        add({ name: `active, ${who}: V8 heap per agent`, value: result.heapPerAgentKb, unit: "KB" });
        add({
          name: `active, ${who}: RSS per agent of 1,000 more`,
          value: result.nextRssPerAgentKb,
          unit: "KB",
        });
        add({
          name: `active, ${who}: V8 heap per agent of 1,000 more`,
          value: result.nextHeapPerAgentKb,
          unit: "KB",
        });
      }
    }
    const idleAgents = quick ? 1000 : 10_000;
    const idle = await measureIdleApart(idleAgents, url, idlePrefix);
    add({
      name: `idle: ${idleAgents.toLocaleString("en-US")} agents waiting on NATS, RSS per agent`,
      value: idle.rssPerAgentKb,
      unit: "KB",
    });
    add({ name: "idle: V8 heap per waiting agent", value: idle.heapPerAgentKb, unit: "KB" });
    const fanout = await measureFanout({
      troupeBin: troupeBin,
      url,
      prefix: fanoutPrefix,
      agents: 100,
      chunks: quick ? 300 : 1000,
      floodRuns: 100,
      floodPerRun: quick ? 100 : 500,
    });
    add({
      name: `fan-out: events/s at a troupe observe process while 100 agents stream (${fanout.events.toLocaleString("en-US")} events: what the agents make)`,
      value: fanout.live,
      unit: "events/s",
    });
    add({
      name: "fan-out: the same log read by an observer from its start",
      value: fanout.catchUp,
      unit: "events/s",
    });
    add({
      name: `fan-out: events/s at a troupe observe process while ${fanout.flooded.toLocaleString("en-US")} events are appended as fast as the log takes them`,
      value: fanout.floodLive,
      unit: "events/s",
      target: "≥ 50,000",
    });
    add({
      name: "fan-out: events/s the log took the flood at, meanwhile (the most the observer could get)",
      value: fanout.floodAppended,
      unit: "events/s",
    });
    add({
      name: "fan-out: the whole log read by an observer from its start",
      value: fanout.floodCatchUp,
      unit: "events/s",
      target: "≥ 150,000",
    });
    add({
      name: `fan-out: events/s at a troupe observe process while another process publishes ${fanout.flooded.toLocaleString("en-US")} events on their runs' subjects, no ack awaited (each stored all the same)`,
      value: fanout.burstLive,
      unit: "events/s",
      target: "≥ 50,000",
    });
    add({
      name: "fan-out: events/s that process published them at (the most the observer could get)",
      value: fanout.burstPublished,
      unit: "events/s",
    });
  } finally {
    const cleanup = await NatsBus.connect({ url, prefix });
    const { jetstreamManager } = await import("@nats-io/jetstream");
    const jsm = await jetstreamManager(cleanup.connection);
    // Listed first: deleting while listing would shift the pages and skip some.
    const names: string[] = [];
    for await (const name of jsm.streams.names()) names.push(name);
    for (const name of names) {
      const ours = [
        prefix,
        durablePrefix,
        floorPrefix,
        daemonPrefix,
        recoveryPrefix,
        scalePrefix,
        idlePrefix,
        activePrefix,
        fanoutPrefix,
      ].some((p) => name === `${p.toUpperCase()}_EVENTS` || name.startsWith(`KV_${p}_`));
      if (ours) await jsm.streams.delete(name).catch(() => {});
    }
    await cleanup.close();
    await server?.stop();
    if (store) rmSync(store, { recursive: true, force: true });
  }

  const results = { date: new Date().toISOString(), node: process.version, quick, reps, rows };
  writeFileSync(join(root, "bench/results.json"), `${JSON.stringify(results, null, 2)}\n`);
  const table = [
    "| measure | median | target |",
    "| --- | --- | --- |",
    ...rows.map((r) => `| ${r.name} | ${format(r.value)} ${r.unit} | ${r.target ?? ""} |`),
  ].join("\n");
  // The sections other bench scripts wrote (`npm run bench:cluster`'s) stay.
  const others = sectionsOf(join(root, "docs/bench.md"));
  writeFileSync(
    join(root, "docs/bench.md"),
    `# Benchmarks\n\n\`npm run bench${quick ? " -- --quick" : ""}\` on ${results.date.slice(0, 10)}, Node ${process.version}, medians of ${reps} runs.\n\n${table}\n${others}`,
  );
  formatWritten(root, ["docs/bench.md", "bench/results.json"]);
  console.log(table);
}

await main();
