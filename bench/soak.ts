/**
 * `npm run soak -- --minutes N [--clients 16] [--every 30-90]`: many `troupe run` clients at once
 * against a daemon and two workers on a nats-server of their own, while one of the three is killed
 * with SIGKILL at random every 30–90 s and started again (nats-server on the same store). Each run
 * is a lead with two subagents in parallel, then a shell command appending a line unique to the
 * run to a ledger. Prints what happened: runs, client exit codes, duplicate side effects, recovery
 * per fault, the daemon's memory and storage per run. Not a test: CI doesn't run it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { jetstreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { connect, nkeyAuthenticator } from "@nats-io/transport-node";
import { NatsServerProcess } from "../src/bus/embedded-nats.js";
import { roleInbox } from "../src/bus/permissions.js";
import { ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { roleSeedFile } from "../src/trust/role-credentials.js";
import { serverTlsFiles } from "../src/trust/server-tls.js";
import { writeDefaultServerConfig } from "./default-server.js";

const flag = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 ? (process.argv[at + 1] ?? fallback) : fallback;
};
const minutes = Number(flag("minutes", "15"));
const clients = Number(flag("clients", "16"));
const [everyMin, everyMax] = flag("every", "30-90").split("-").map(Number) as [number, number];
/** troupe.yaml's daemon.keepFinished in the soak, so that storage after retention can be measured. */
const KEEP_S = 20;
const troupeBin = fileURLToPath(new URL("./troupe-bin.js", import.meta.url));

const root = mkdtempSync(join(tmpdir(), "troupe-soak-"));
const ws = join(root, "ws");
const config = join(root, "config");
mkdirSync(join(config, "agents"), { recursive: true });
mkdirSync(ws);
writeFileSync(
  join(config, "troupe.yaml"),
  `defaultAgent: lead\ndefaultModel: scripted\ndaemon:\n  maxApproval: yolo\n  keepFinished: ${KEEP_S}s\n`,
);
writeFileSync(
  join(config, "agents/lead.yaml"),
  "name: lead\ndescription: Leads.\ntools: [shell]\nsubagents: [scout]\n",
);
writeFileSync(
  join(config, "agents/scout.yaml"),
  "name: scout\ndescription: Scouts.\nreadOnly: true\ntools: [read_file]\n",
);
writeFileSync(join(ws, "notes.txt"), "the soak\n");

const jobOf = (request: { messages: Array<{ role: string; content?: unknown }> }) =>
  String(request.messages.find((m) => m.role === "user")?.content ?? "").match(/job-(\d+)/)?.[1] ?? "x";
const model = await ScriptedModelServer.start([
  { match: { system: 'You are "scout"' }, times: Number.POSITIVE_INFINITY, reply: { text: "scouted" } },
  {
    match: { system: 'You are "lead"', turn: 1 },
    times: Number.POSITIVE_INFINITY,
    reply: {
      toolCalls: [
        { name: "subagent_scout", arguments: { task: "Look left." } },
        { name: "subagent_scout", arguments: { task: "Look right." } },
      ],
    },
  },
  {
    match: { system: 'You are "lead"', turn: 2 },
    times: Number.POSITIVE_INFINITY,
    reply: (request) => ({
      toolCalls: [{ name: "shell", arguments: { command: `echo job-${jobOf(request)} >> ledger.txt` } }],
    }),
  },
  {
    match: { system: 'You are "lead"', turn: 3 },
    times: Number.POSITIVE_INFINITY,
    // What the command said, when it was not a plain success, goes into the answer.
    reply: (request) => {
      const said = String(request.messages.findLast((m) => m.role === "tool")?.content ?? "");
      return {
        text: `done job-${jobOf(request)}${/error|unknown/i.test(said) ? ` (the shell: ${said.slice(0, 300)})` : ""}`,
      };
    },
  },
]);

const storeDir = join(root, "nats-store");
// The server as the daemon starts its own: TLS on the data dir's CA, the two accounts. Every process
// of the soak finds its role's seed and the CA in the data dir, as on a user's machine.
const dataDir = join(root, "data");
const conf = writeDefaultServerConfig(dataDir, join(root, "nats.conf"), ["troupe"]);
let nats = await NatsServerProcess.start({ storeDir, args: ["-c", conf] });
const env = {
  ...process.env,
  HOME: root,
  NATS_URL: nats.url,
  OPENAI_BASE_URL: model.baseURL,
  OPENAI_API_KEY: "",
  TROUPE_DATA_DIR: dataDir,
  // A client that fails says where, with the stack.
  TROUPE_DEBUG: "1",
};
const troupe = (args: string[]) =>
  spawn(process.execPath, [troupeBin, "--config", config, ...args], {
    cwd: ws,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });

const started = Date.now();
const since = () => Date.now() - started;
const takeovers: number[] = [];
let finishing = false;

/** A long-lived process (the daemon, a worker): its stderr watched for the line that says it is up. */
let services = 0;
function service(args: string[], ready: string) {
  const child = troupe(args);
  const logFile = join(root, `${args[0]}-${++services}.log`);
  child.stderr?.on("data", (chunk: Buffer) => appendFileSync(logFile, chunk));
  let seen = "";
  const up = new Promise<void>((resolve) => {
    child.stderr?.on("data", (chunk: Buffer) => {
      seen = (seen + chunk.toString()).slice(-4096);
      if (seen.includes(ready)) resolve();
      if (chunk.includes("taking over an actor")) takeovers.push(since());
    });
  });
  child.stdout?.resume();
  child.once("exit", (code, signal) => {
    if (signal !== "SIGKILL" && !finishing)
      process.stderr.write(`soak: troupe ${args[0]} exited (${code ?? signal}):\n${seen}\n`);
  });
  return { child, up };
}

let daemon = service(["daemon"], "troupe daemon ready");
await daemon.up;
const workerArgs = ["worker", "--heartbeat-ms", "500", "--dead-after-ms", "3000"];
const workers = [service(workerArgs, "troupe worker"), service(workerArgs, "troupe worker")];

/** The daemon's resident memory, in MB, every 2 s. */
const rss: number[] = [];
const sampling = setInterval(() => {
  try {
    const status = readFileSync(`/proc/${daemon.child.pid}/status`, "utf8");
    rss.push(Number(status.match(/VmRSS:\s+(\d+)/)?.[1] ?? 0) / 1024);
  } catch {
    // Between a kill and a restart.
  }
}, 2000);

interface Job {
  job: number;
  code: number | null;
  reason: string | undefined;
  startedAt: number;
  endedAt: number;
  /** The model was told a command's outcome was unknown (cut short by a crash, not run again). */
  unknown: boolean;
}
const jobs: Job[] = [];
/** Clients still following their runs. */
const active = new Set<ChildProcess>();
const endAt = Date.now() + minutes * 60_000;
let nextJob = 0;

async function client(): Promise<void> {
  while (Date.now() < endAt) {
    const job = ++nextJob;
    const startedAt = since();
    const child = troupe(["run", "--json", "--approval", "yolo", "--wait-daemon", "120", `soak job-${job}`]);
    active.add(child);
    child.once("exit", () => active.delete(child));
    let out = "";
    let unknown = false;
    child.stdout?.on("data", (chunk: Buffer) => {
      out = (out + chunk.toString()).slice(-8192);
      unknown ||= out.includes("its outcome is unknown");
    });
    let err = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      err = (err + chunk.toString()).slice(-2048);
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    const last = out.trim().split("\n").at(-1) ?? "";
    let reason: string | undefined;
    try {
      const event = JSON.parse(last) as { type: string; data: { reason?: string } };
      if (event.type === "agent.stopped") reason = event.data.reason;
    } catch {}
    jobs.push({ job, code, reason, startedAt, endedAt: since(), unknown });
    if (code !== 0)
      process.stderr.write(
        `soak: ${Math.round(since() / 1000)} s: job-${job} exited ${code}: ${err.trim().split("\n").slice(-12).join("\n  ")}\n`,
      );
  }
}

interface Fault {
  kind: "daemon" | "worker" | "nats";
  at: number;
}
const faults: Fault[] = [];
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function chaos(): Promise<void> {
  for (;;) {
    await pause((everyMin + Math.random() * (everyMax - everyMin)) * 1000);
    if (Date.now() >= endAt - 10_000) return;
    const kind = (["daemon", "worker", "nats"] as const)[Math.floor(Math.random() * 3)] as Fault["kind"];
    faults.push({ kind, at: since() });
    process.stderr.write(`soak: ${Math.round(since() / 1000)} s: kill -9 ${kind}\n`);
    if (kind === "nats") {
      await nats.kill("SIGKILL");
      await pause(1000);
      nats = await nats.restart();
    } else if (kind === "daemon") {
      daemon.child.kill("SIGKILL");
      await pause(1000);
      daemon = service(["daemon"], "troupe daemon ready");
    } else {
      const which = Math.floor(Math.random() * workers.length);
      workers[which]?.child.kill("SIGKILL");
      await pause(1000);
      workers[which] = service(workerArgs, "troupe worker");
    }
  }
}

const rssAtStart = await pause(2500).then(() => rss.at(-1) ?? 0);
process.stderr.write(`soak: ${clients} clients for ${minutes} min in ${root}\n`);
const chaosDone = chaos();
// After the last fault, two minutes for the runs under way to finish; a client still waiting then
// follows a run that is stuck.
const clientsDone = Promise.all(Array.from({ length: clients }, () => client()));
await chaosDone;
await Promise.race([clientsDone, pause(Math.max(0, endAt - Date.now()) + 120_000)]);
const stuckClients = active.size;
for (const child of active) child.kill("SIGKILL");
await clientsDone;
const rssAtEnd = rss.at(-1) ?? 0;

// What the daemon has on record, read from its API, and the storage, as the daemon sees them.
const nc = await connect({
  servers: nats.url,
  authenticator: nkeyAuthenticator(
    new TextEncoder().encode(readFileSync(roleSeedFile(dataDir, "daemon"), "utf8").trim()),
  ),
  tls: { caFile: serverTlsFiles(dataDir).ca },
  inboxPrefix: roleInbox("troupe", "daemon"),
});
// Every record, read from the runs bucket (runs.list sends the newest 1,000).
const runsBucket = await new Kvm(nc).open("troupe_runs");
const records: Array<{ task: string; status: string; result?: string }> = [];
// A key filter's `*` is a whole token, so "run-*" would match none: every key is read, runs kept.
for await (const key of await runsBucket.keys())
  if (key.startsWith("run-")) records.push((await runsBucket.get(key))?.json() as (typeof records)[number]);
for (const record of records)
  if (record.result?.includes("(the shell:"))
    process.stderr.write(`soak: ${record.task}: ${record.result}\n`);
const ledger = readFileSync(join(ws, "ledger.txt"), "utf8").trim().split("\n");
const lines = new Map<string, number>();
for (const line of ledger) lines.set(line, (lines.get(line) ?? 0) + 1);
const byStatus = (status: string) => records.filter((r) => r.status === status).length;
/** Told by the event (tool.finished) or, in the model's last answer, by what the shell said. */
const told = [
  ...new Set([
    ...jobs.filter((j) => j.unknown).map((j) => `job-${j.job}`),
    ...records
      .filter((r) => /outcome is unknown/.test(r.result ?? ""))
      .map((r) => r.task.replace("soak ", "")),
  ]),
];
const doneTasks = records.filter((r) => r.status === "done").map((r) => r.task.replace("soak ", ""));

// Storage after the finished runs' state is removed (keepFinished, then a moment).
await pause((KEEP_S + 5) * 1000);
const jsm = await jetstreamManager(nc);
const streams: Array<{ name: string; messages: number; bytes: number }> = [];
for await (const info of jsm.streams.list())
  streams.push({ name: info.config.name, messages: info.state.messages, bytes: info.state.bytes });
await nc.close();

const exits = new Map<string, number>();
for (const { code } of jobs) exits.set(String(code), (exits.get(String(code)) ?? 0) + 1);
const badExitsForDone = jobs.filter((j) => j.code !== 0 && doneTasks.includes(`job-${j.job}`)).length;
/** From a fault to the first run submitted after it finishing. */
const recovery = (kind: Fault["kind"]) =>
  faults
    .filter((f) => f.kind === kind)
    .map((f) => {
      const next = jobs
        .filter((j) => j.startedAt > f.at && j.code === 0)
        .sort((a, b) => a.endedAt - b.endedAt)[0];
      return next ? (next.endedAt - f.at) / 1000 : Number.NaN;
    });
const range = (values: number[]) =>
  values.length === 0
    ? "–"
    : `${Math.min(...values).toFixed(1)}–${Math.max(...values).toFixed(1)} s (${values.length}×)`;
const total = streams.reduce((sum, s) => sum + s.bytes, 0);
const rows: Array<[string, string]> = [
  ["duration", `${minutes} min, ${clients} clients, a fault every ${everyMin}–${everyMax} s`],
  ["runs submitted", String(jobs.length)],
  [
    "runs done / failed / stuck",
    `${byStatus("done")} / ${records.length - byStatus("done") - byStatus("running")} / ${byStatus("running")}`,
  ],
  ["clients still following a run 2 min after the end", String(stuckClients)],
  ["client exit codes", [...exits].map(([code, n]) => `${code}: ${n}`).join(", ")],
  ["clients exiting non-zero for a run that finished done", String(badExitsForDone)],
  [
    "runs submitted with no record",
    String(jobs.filter((j) => !records.some((r) => r.task === `soak job-${j.job}`)).length),
  ],
  ["ledger lines written twice", String([...lines.values()].filter((n) => n > 1).length)],
  [
    "done runs with no ledger line (of them, told the command's outcome is unknown)",
    `${doneTasks.filter((t) => !lines.has(t)).length} (${told.filter((t) => !lines.has(t)).length})`,
  ],
  ["runs told a command's outcome is unknown", String(told.length)],
  [
    "faults: daemon / worker / nats",
    `${faults.filter((f) => f.kind === "daemon").length} / ${faults.filter((f) => f.kind === "worker").length} / ${faults.filter((f) => f.kind === "nats").length}`,
  ],
  ["kill daemon → next new run done", range(recovery("daemon"))],
  ["kill worker → next new run done", range(recovery("worker"))],
  ["kill nats-server → next new run done", range(recovery("nats"))],
  ["worker takeovers seen", String(takeovers.length)],
  [
    "daemon RSS start / peak / end",
    `${rssAtStart.toFixed(0)} / ${Math.max(...rss).toFixed(0)} / ${rssAtEnd.toFixed(0)} MB`,
  ],
  [
    "storage after retention",
    `${(total / 1e6).toFixed(1)} MB, ${(total / Math.max(1, records.length) / 1000).toFixed(1)} KB per run`,
  ],
  ...streams
    .sort((a, b) => b.bytes - a.bytes)
    .map((s): [string, string] => [
      `  ${s.name}`,
      `${s.messages} messages, ${(s.bytes / 1e6).toFixed(2)} MB`,
    ]),
];
process.stdout.write(
  `| measure | value |\n|---|---|\n${rows.map(([k, v]) => `| ${k} | ${v} |`).join("\n")}\n`,
);

clearInterval(sampling);
finishing = true;
for (const child of [daemon.child, ...workers.map((w) => w.child)] as ChildProcess[]) child.kill("SIGTERM");
await pause(2000);
await nats.stop();
await model.close();
const twice = [...lines].filter(([, n]) => n > 1).map(([line]) => line);
const missing = doneTasks.filter((t) => !lines.has(t));
const anomalies = twice.length + missing.length + jobs.filter((j) => j.code !== 0).length;
if (anomalies === 0) rmSync(root, { recursive: true, force: true });
else
  process.stderr.write(
    `soak: kept ${root} (services' logs, the NATS store)${twice.length ? `; written twice: ${twice.join(", ")}` : ""}${missing.length ? `; done without a line: ${missing.join(", ")}` : ""}\n`,
  );
process.exit(0);
