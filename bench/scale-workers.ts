/**
 * `npm run bench:scale [-- --quick]`: ten thousand agents at once across processes. A hundred leads
 * in the bench's runtime (as the daemon hosts them) each spawn a hundred subagents in one reply,
 * placed on three `troupe worker` processes; each subagent reads a file twice, then answers, against a
 * scripted model (a process of its own) that takes 200 ms a reply. One nats-server the bench starts,
 * with its monitoring port. Measured: the wall time, each process's peak RSS, the bus's message rate
 * (the server's own counts), and, at an observer in a process of its own, the time from each
 * subagent's answer leaving the model to its event. Writes the "At scale" section of docs/bench.md.
 * Bounded: the agents get ten minutes. `--quick`: ten leads (1,000 subagents).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, NatsServerProcess } from "../src/bus/embedded-nats.js";
import { waitFor } from "../test/support/wait.js";
import { deploy, startWorker, whenWritten } from "./cluster-deployment.js";
import { leadRuntime } from "./cluster-throughput.js";
import { startModelProcess, WORKERS_PER_LEAD } from "./model-process.js";
import { stopChild } from "./processes.js";
import { format, formatWritten, writeSection } from "./report.js";
import { agentsDone } from "./scale.js";
import type { ObserverReport } from "./scale-observer.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const quick = process.argv.includes("--quick");
const LEADS = quick ? 10 : 100;
const WORKERS = 3;
const BOUND_MS = 10 * 60_000;

/** A process's peak resident set (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb ?? Number.NaN) / 1024;
}

/** The server's counts of messages in and out (its /varz). */
async function messageCounts(monitor: number): Promise<{ in: number; out: number }> {
  const varz = (await (await fetch(`http://127.0.0.1:${monitor}/varz`)).json()) as {
    in_msgs: number;
    out_msgs: number;
  };
  return { in: varz.in_msgs, out: varz.out_msgs };
}

function startObserver(url: string, prefix: string): { child: ChildProcess; ready: Promise<unknown> } {
  const child = spawn(
    process.execPath,
    [fileURLToPath(new URL("./scale-observer.js", import.meta.url)), url, prefix],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  child.stdout?.setEncoding("utf8");
  return { child, ready: whenWritten(child, "stdout", /ready\n/) };
}

async function observerReport(child: ChildProcess): Promise<ObserverReport> {
  const line = whenWritten(child, "stdout", /(\{.*\})\n/);
  child.kill("SIGTERM");
  const [, json = "{}"] = await line;
  await stopChild(child);
  return JSON.parse(json) as ObserverReport;
}

async function main(): Promise<void> {
  const store = mkdtempSync(join(tmpdir(), "troupe-bench-scale-"));
  const monitor = await freePort();
  const server = await NatsServerProcess.start({ storeDir: store, args: ["-m", String(monitor)] });
  const model = await startModelProcess("lead-and-readers-200ms-stamped");
  const deployment = deploy({ replicas: 1, modelURL: model.baseURL, subagents: WORKERS_PER_LEAD });
  const observer = startObserver(server.url, deployment.prefix);
  try {
    const leads = await leadRuntime(deployment, server.url);
    try {
      const workers = [];
      for (let i = 0; i < WORKERS; i++)
        // Dead only after a long silence: a worker busy with thousands of agents is not taken for dead.
        workers.push(await startWorker(deployment, server.url, { heartbeatMs: 1000, deadAfterMs: 60_000 }));
      // A worker that exits fails the bench at once, with what it said last.
      let lost: (error: Error) => void = () => {};
      const workerLost = new Promise<never>((_, fail) => (lost = fail));
      workerLost.catch(() => {});
      for (const worker of workers) {
        let said = "";
        worker.child.stderr?.on("data", (chunk: string) => {
          said = `${said}${chunk}`.slice(-2000);
          if (process.env.TROUPE_BENCH_WORKER_LOGS)
            appendFileSync(join(process.env.TROUPE_BENCH_WORKER_LOGS, `${worker.id}.log`), chunk);
        });
        worker.child.once("exit", (code) => lost(new Error(`worker ${worker.id} exited (${code}): ${said}`)));
      }
      const heartbeats = await leads.runtime.bus.kv("workers");
      await waitFor(
        "the workers' heartbeats",
        async () => (await heartbeats.keys()).length === WORKERS,
        15_000,
      );
      await observer.ready;
      const once = async () => agentsDone(await leads.runtime.start({ task: "have the workers read" }).done);
      await Promise.race([once(), workerLost]); // warm up: modules, sockets, streams, in every process
      leads.hostedHere = 0;
      const before = await messageCounts(monitor);
      const started = performance.now();
      let timer: NodeJS.Timeout | undefined;
      const bound = new Promise<never>((_, fail) => {
        timer = setTimeout(
          () => fail(new Error(`the agents took longer than ${BOUND_MS / 1000} s`)),
          BOUND_MS,
        );
      });
      const finished = await Promise.race([
        Promise.all(Array.from({ length: LEADS }, () => once())),
        bound,
        workerLost,
      ]);
      clearTimeout(timer);
      const wallMs = performance.now() - started;
      const after = await messageCounts(monitor);
      const load = loadavg()[0] ?? 0;
      const seen = await observerReport(observer.child);
      const result = {
        date: new Date().toISOString(),
        node: process.version,
        leads: LEADS,
        agents: LEADS * (WORKERS_PER_LEAD + 1),
        finished: finished.reduce((sum, n) => sum + n, 0),
        hostedByLead: leads.hostedHere,
        wallMs,
        load,
        rssMb: {
          leads: peakRssMb(process.pid),
          workers: workers.map((worker) => peakRssMb(worker.child.pid ?? 0)),
        },
        messagesInPerSecond: ((after.in - before.in) / wallMs) * 1000,
        messagesOutPerSecond: ((after.out - before.out) / wallMs) * 1000,
        observer: seen,
      };
      process.stderr.write(`${JSON.stringify(result)}\n`);
      report(result);
    } finally {
      await leads.close();
    }
  } finally {
    if (observer.child.exitCode === null) await stopChild(observer.child);
    await deployment.stop();
    await model.stop();
    await server.stop();
    rmSync(store, { recursive: true, force: true });
  }
}

function report(result: {
  date: string;
  agents: number;
  finished: number;
  hostedByLead: number;
  wallMs: number;
  load: number;
  rssMb: { leads: number; workers: number[] };
  messagesInPerSecond: number;
  messagesOutPerSecond: number;
  observer: ObserverReport;
}): void {
  const mb = (value: number) => `${format(value)} MB`;
  const perWorker = (WORKERS_PER_LEAD * LEADS) / WORKERS;
  const rows: Array<[string, string]> = [
    ["agents started at once (leads and subagents)", result.agents.toLocaleString("en-US")],
    ["agents that did their three turns", result.finished.toLocaleString("en-US")],
    ["subagents no worker took (hosted by their lead)", String(result.hostedByLead)],
    ["wall time, from the first run started to the last done", `${format(result.wallMs)} ms`],
    ["peak RSS, the leads' process", mb(result.rssMb.leads)],
    ...result.rssMb.workers.map((rss, i): [string, string] => [
      `peak RSS, worker ${i + 1} (about ${format(perWorker)} subagents)`,
      mb(rss),
    ]),
    ["messages into the server a second (mean over the wall time)", format(result.messagesInPerSecond)],
    ["messages out of the server a second", format(result.messagesOutPerSecond)],
    ["events the observer got", result.observer.events.toLocaleString("en-US")],
    [
      "subagents' answers it got with their stamp (a reply retried is stamped again)",
      result.observer.stamped.toLocaleString("en-US"),
    ],
    ["model reply → its event at the observer, median", `${format(result.observer.p50Ms)} ms`],
    ["the same, p99", `${format(result.observer.p99Ms)} ms`],
    ["the same, max", `${format(result.observer.maxMs)} ms`],
    ["the machine's load average (1 min) at the end", result.load.toFixed(1)],
  ];
  const section = [
    "## At scale",
    "",
    `\`npm run bench:scale${quick ? " -- --quick" : ""}\` on ${result.date.slice(0, 10)}, Node ${process.version}, on loopback, ` +
      `this machine's two cores: ${LEADS} leads in the bench's runtime (as the daemon hosts them), each spawning ` +
      `${WORKERS_PER_LEAD} subagents in one reply, placed on ${WORKERS} \`troupe worker\` processes; a subagent reads a ` +
      "file twice, then answers; the scripted model (a process of its own) takes 200 ms a reply and stamps each " +
      "subagent's answer with when it sent it. One nats-server the bench starts. The observer is a plain subscription " +
      "to every event, in a process of its own. The agents get ten minutes; `-- --quick` runs ten leads.",
    "",
    "| measure | value |",
    "| --- | --- |",
    ...rows.map(([name, value]) => `| ${name} | ${value} |`),
    "",
  ].join("\n");
  writeSection(join(root, "docs/bench.md"), section);
  formatWritten(root, ["docs/bench.md"]);
  console.log(section);
}

await main();
