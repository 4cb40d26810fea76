/**
 * `npm run bench:cluster [-- --quick]`: Troupe across processes on loopback, on a nats-server and on
 * a three-node cluster at R3 that the bench starts: throughput of subagents on `troupe worker`s, and
 * the time a run takes to go on after a node, a worker or a worker's link is lost. Writes
 * bench/cluster-results.json and the "Across a cluster" section of docs/bench.md. Not a test: CI
 * doesn't run it.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { BrokerKind } from "./cluster-deployment.js";
import {
  DEFAULT_TIMING,
  type Fault,
  measureRecovery,
  type RecoverySample,
  type WorkerTiming,
} from "./cluster-recovery.js";
import { measureThroughput, type ThroughputResult } from "./cluster-throughput.js";
import { WORKERS_PER_LEAD } from "./model-process.js";
import { format, formatWritten, median, writeSection } from "./report.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const quick = process.argv.includes("--quick");
/** Subagents in a throughput measure, in leads of `WORKERS_PER_LEAD`. */
const SUBAGENTS = 1000;
/** Rounds of the four throughput measures, taken in turn (two: the whole bench stays within ten minutes). */
const rounds = quick ? 1 : 2;
/** Samples of each fault. */
const reps = quick ? 2 : 5;
/** A short dead-after, beside the default; heartbeats five times as often, so a live worker is never taken for dead. */
const SHORT_TIMING: WorkerTiming = { heartbeatMs: 200, deadAfterMs: 1000 };

const combinations: Array<{ broker: BrokerKind; workers: number }> = [
  { broker: "single", workers: 1 },
  { broker: "single", workers: 2 },
  { broker: "cluster", workers: 1 },
  { broker: "cluster", workers: 2 },
];
const faults: Array<{ fault: Fault; timing?: WorkerTiming }> = [
  { fault: "leader node" },
  { fault: "follower node" },
  { fault: "worker", timing: DEFAULT_TIMING },
  { fault: "worker", timing: SHORT_TIMING },
  // Cut off, a worker is taken for dead as a killed one is: the short setting is enough to see it.
  { fault: "partition", timing: SHORT_TIMING },
];

const started = performance.now();
/** A raw result, said on stderr as it is measured. */
function say(result: object): void {
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stderr.write(`${seconds.padStart(6)} s  ${JSON.stringify(result)}\n`);
}

async function main(): Promise<void> {
  const throughput: Array<ThroughputResult & { load: number }> = [];
  for (let round = 0; round < rounds; round++)
    for (const { broker, workers } of combinations) {
      // The machine's load average (1 min) after it: what else ran on the two cores meanwhile.
      const result = { ...(await measureThroughput(broker, workers, SUBAGENTS)), load: loadavg()[0] ?? 0 };
      say(result);
      throughput.push(result);
    }
  const recovery: RecoverySample[] = [];
  for (const { fault, timing } of faults)
    for (let i = 0; i < reps; i++) {
      const sample = await measureRecovery(fault, timing);
      say(sample);
      recovery.push(sample);
    }
  const results = {
    date: new Date().toISOString(),
    node: process.version,
    quick,
    rounds,
    reps,
    throughput,
    recovery,
  };
  writeFileSync(join(root, "bench/cluster-results.json"), `${JSON.stringify(results, null, 2)}\n`);
  const section = [
    "## Across a cluster",
    "",
    `\`npm run bench:cluster${quick ? " -- --quick" : ""}\` on ${results.date.slice(0, 10)}, Node ${process.version}, ` +
      "on loopback: a nats-server, or three in a cluster with Troupe's stream and buckets at R3 " +
      "(troupe.yaml's `nats.stream.replicas` and `nats.kv.replicas`), each started by the bench; " +
      "real `troupe daemon`, `troupe worker` and `troupe run` processes; the scripted model over HTTP. " +
      "To rerun: `npm run bench:cluster` (about 9 minutes; `-- --quick` takes one round and two samples of each fault), " +
      "with `nats-server` on the PATH; no root, no namespaces. The raw results go to bench/cluster-results.json.",
    "",
    throughputTable(throughput),
    "",
    recoveryTable(recovery),
    "",
  ].join("\n");
  writeSection(join(root, "docs/bench.md"), section);
  formatWritten(root, ["docs/bench.md", "bench/cluster-results.json"]);
  console.log(section);
}

function throughputTable(results: Array<ThroughputResult & { load: number }>): string {
  const rows = combinations.map(({ broker, workers }) => {
    const mine = results.filter((r) => r.broker === broker && r.workers === workers);
    const wallMs = mine.reduce((sum, r) => sum + r.wallMs, 0) / mine.length;
    const nats = broker === "single" ? "one nats-server (R1)" : "3-node cluster (R3)";
    const each = mine.map((r) => `${format(r.wallMs)} ms (load ${r.load.toFixed(1)})`).join(", ");
    const leadHosted = mine.reduce((sum, r) => sum + r.hostedByLead, 0);
    const unfinished = mine.reduce((sum, r) => sum + r.agents - r.finished, 0);
    return `| ${nats} | ${workers} | ${format(wallMs)} ms | ${format((SUBAGENTS / wallMs) * 1000)} | ${each} | ${leadHosted} | ${unfinished} |`;
  });
  return [
    `Throughput: ${SUBAGENTS.toLocaleString("en-US")} subagents × 3 turns (${SUBAGENTS / WORKERS_PER_LEAD} leads in the bench's runtime, ` +
      `each spawning ${WORKERS_PER_LEAD} at once, placed on the workers; a subagent reads a file twice, then answers; ` +
      `the model takes 20 ms a reply), the mean of ${rounds} round${rounds === 1 ? "" : "s"}, each after a warm-up run. ` +
      "The leads are on the first node, the workers on the next ones. The load is the machine's 1-minute load average " +
      "after each round: what else ran on its two cores meanwhile.",
    "",
    "| NATS | workers | wall time | subagents/s | each round | hosted by their lead (no worker took them) | agents unfinished |",
    "| --- | --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

const faultNames: Record<Fault, string> = {
  "leader node": "kill -9 of the daemon's nats node, which led the event stream",
  "follower node": "kill -9 of the daemon's nats node, a replica of the event stream",
  worker: "kill -9 of the worker hosting the subagent",
  partition: "the worker hosting the subagent cut off from NATS (a relay stops forwarding)",
};

function recoveryTable(samples: RecoverySample[]): string {
  const rows = faults.map(({ fault, timing }) => {
    const mine = samples.filter((s) => s.fault === fault && s.timing?.deadAfterMs === timing?.deadAfterMs);
    const spread = (values: number[]) => `${format(median(values))} / ${format(Math.max(...values))} ms`;
    const setting = timing
      ? `, --dead-after-ms ${timing.deadAfterMs} (--heartbeat-ms ${timing.heartbeatMs})`
      : "";
    const each = mine.map((s) => `${format(s.clientMs)} / ${format(s.logMs)}`).join(", ");
    return `| ${faultNames[fault]}${setting} | ${spread(mine.map((s) => s.clientMs))} | ${spread(mine.map((s) => s.logMs))} | ${each} |`;
  });
  return [
    `Recovery on the cluster, median / max of ${reps}: from the fault, mid-answer, to the first event made after it ` +
      "(its `ts` later than the fault's end) of the agent that was streaming (the lead for a node, the subagent for a worker), " +
      "as the `troupe run` client printed it and as a reader of the event log with follow (JetStream) got it. " +
      "The client hears events on a plain subscription and reads the log once it may have missed one: its figure is the " +
      "live path's when it missed nothing, the log's otherwise. The agent streams a chunk every 20 ms. " +
      "Fresh processes and a fresh cluster for each sample; the client is on a node that is not killed.",
    "",
    "| fault | next event at the client | next event in the log | each sample, client / log (ms) |",
    "| --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

await main();
