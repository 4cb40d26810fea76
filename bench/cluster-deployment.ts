/**
 * What bench/cluster.ts deploys on loopback: a broker (one nats-server, or the three-node cluster of
 * the fault tests), a config tree with a lead and its "worker" subagent, and troupe processes
 * (`troupe daemon`, `troupe worker`, `troupe run --json`) started from the CLI compiled with the bench.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Bus } from "../src/bus/bus.js";
import { NatsServerProcess } from "../src/bus/embedded-nats.js";
import { uniquePrefix } from "../src/bus/subjects.js";
import type { Envelope } from "../src/events/envelope.js";
import { startCluster } from "../test/support/nats-cluster.js";
import { stopChild } from "./processes.js";

/** The CLI as bin/troupe.js runs it, compiled with the bench (bench/troupe-bin.ts). */
const troupeBin = fileURLToPath(new URL("./troupe-bin.js", import.meta.url));

export type BrokerKind = "single" | "cluster";

/** NATS as the bench runs it: one server, or three nodes with Troupe's stream and buckets at R3. */
export interface Broker {
  kind: BrokerKind;
  /** Each node's client URL, in order. */
  urls: string[];
  /** What troupe.yaml's `nats.stream.replicas` and `nats.kv.replicas` say. */
  replicas: number;
  /** Kills node `i` with a real SIGKILL, by pid. */
  kill(i: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startBroker(kind: BrokerKind, dir: string): Promise<Broker> {
  if (kind === "cluster") {
    const cluster = await startCluster(dir);
    return {
      kind,
      urls: cluster.urls,
      replicas: 3,
      kill: (i) => cluster.kill(i),
      stop: () => cluster.stop(),
    };
  }
  const server = await NatsServerProcess.start({ storeDir: dir });
  return {
    kind,
    urls: [server.url],
    replicas: 1,
    kill: () => server.kill("SIGKILL"),
    stop: () => server.stop(),
  };
}

/** The node a process of the deployment connects to: the daemon to the first, workers to the others. */
export const nodeFor = (broker: Broker, i: number): string => broker.urls[i % broker.urls.length] ?? "";

/**
 * A temp dir with the config every troupe process of one deployment loads: the lead, with
 * `subagents` of "worker" at once, and the "worker", which reads `notes.txt` in the workspace.
 */
export interface Deployment {
  dir: string;
  configDir: string;
  workspace: string;
  prefix: string;
  /** The environment of a troupe process connected to `url`. */
  env(url: string): NodeJS.ProcessEnv;
  /** Starts a troupe command connected to `url`; `stop` ends it. */
  troupe(args: string[], url: string): ChildProcess;
  /** Ends every process it started (SIGKILL, by pid), and removes the temp dir. */
  stop(): Promise<void>;
}

export function deploy(options: { replicas: number; modelURL: string; subagents: number }): Deployment {
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-cluster-"));
  const prefix = uniquePrefix("bc");
  const configDir = join(dir, "config");
  const workspace = join(dir, "ws");
  mkdirSync(join(configDir, "agents"), { recursive: true });
  mkdirSync(workspace);
  writeFileSync(
    join(configDir, "troupe.yaml"),
    [
      "defaultAgent: lead",
      "defaultModel: scripted",
      "nats:",
      `  prefix: ${prefix}`,
      "  embedded: false",
      `  stream: { replicas: ${options.replicas} }`,
      `  kv: { replicas: ${options.replicas} }`,
      `subagents: { maxConcurrent: ${options.subagents} }`,
      "",
    ].join("\n"),
  );
  writeFileSync(
    join(configDir, "agents/lead.yaml"),
    "name: lead\ndescription: Leads.\nsubagents: [worker]\n",
  );
  writeFileSync(
    join(configDir, "agents/worker.yaml"),
    "name: worker\ndescription: Reads.\nreadOnly: true\ntools: [read_file]\n",
  );
  writeFileSync(join(workspace, "notes.txt"), "the answer is 42\n");
  const children: ChildProcess[] = [];
  const env = (url: string) => ({
    ...process.env,
    NATS_URL: url,
    OPENAI_BASE_URL: options.modelURL,
    OPENAI_API_KEY: "",
    HOME: dir,
    TROUPE_DATA_DIR: join(dir, ".data"),
  });
  return {
    dir,
    configDir,
    workspace,
    prefix,
    env,
    troupe(args, url) {
      const child = spawn(process.execPath, [troupeBin, "--config", configDir, ...args], {
        cwd: workspace,
        env: env(url),
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      // Read whether or not anyone listens: a full pipe would stall the process.
      child.stdout?.setEncoding("utf8").resume();
      child.stderr?.setEncoding("utf8").resume();
      return child;
    },
    async stop() {
      for (const child of children) await stopChild(child, "SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Resolves with what `child` writes on `stream` once it matches `pattern` (listen in the tick that
 * started it); rejects if it exits first.
 */
export function whenWritten(
  child: ChildProcess,
  stream: "stdout" | "stderr",
  pattern: RegExp,
): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let text = "";
    const read = (chunk: string) => {
      text += chunk;
      const match = text.match(pattern);
      if (!match) return;
      child[stream]?.off("data", read);
      resolve(match);
    };
    child[stream]?.on("data", read);
    child.once("exit", (code) =>
      reject(new Error(`a troupe process exited (${code}) early: ${text.trim()}`)),
    );
  });
}

/** A `troupe worker`, started and ready, with the id it heartbeats under. */
export interface WorkerProcess {
  id: string;
  child: ChildProcess;
}

export async function startWorker(
  deployment: Deployment,
  url: string,
  timing: { heartbeatMs: number; deadAfterMs: number },
): Promise<WorkerProcess> {
  const child = deployment.troupe(
    ["worker", "--heartbeat-ms", String(timing.heartbeatMs), "--dead-after-ms", String(timing.deadAfterMs)],
    url,
  );
  const [, id = ""] = await whenWritten(child, "stderr", /troupe worker (\S+) \(pid/);
  return { id, child };
}

/** An event as a follower got it, and when the bench had it (ms since the epoch, as `ts`). */
export interface SeenEvent {
  envelope: Envelope;
  at: number;
}

interface Waiter {
  predicate: (event: Envelope) => boolean;
  resolve: (seen: SeenEvent) => void;
  reject: (error: Error) => void;
}

/** The events a follower of a run got, as they come: `next` waits for one. */
export class Followed {
  readonly seen: SeenEvent[] = [];
  #waiting: Waiter[] = [];
  #error: Error | undefined;

  /** What a `troupe run --json` client prints: one envelope a line. */
  static client(child: ChildProcess): Followed {
    const followed = new Followed();
    let partial = "";
    child.stdout?.on("data", (chunk: string) => {
      const at = Date.now();
      const lines = `${partial}${chunk}`.split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) if (line.trim()) followed.#add(JSON.parse(line) as Envelope, at);
    });
    return followed;
  }

  /** The run's events in the event log, read with follow until `signal` aborts. */
  static log(bus: Bus, runId: string, signal: AbortSignal): Followed {
    const followed = new Followed();
    void (async () => {
      for await (const { envelope } of bus.eventLog.read({ runId, follow: true, signal }))
        followed.#add(envelope, Date.now());
    })().catch((error: Error) => {
      if (!signal.aborted) followed.#fail(error);
    });
    return followed;
  }

  /** The first event (already seen or still to come) that `predicate` takes. */
  next(predicate: (event: Envelope) => boolean, timeoutMs: number, what: string): Promise<SeenEvent> {
    const found = this.seen.find((seen) => predicate(seen.envelope));
    if (found) return Promise.resolve(found);
    if (this.#error) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
      this.#waiting.push({
        predicate,
        resolve: (seen) => {
          clearTimeout(timer);
          resolve(seen);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
    });
  }

  #add(envelope: Envelope, at: number): void {
    const seen = { envelope, at };
    this.seen.push(seen);
    this.#waiting = this.#waiting.filter((waiter) => {
      if (!waiter.predicate(envelope)) return true;
      waiter.resolve(seen);
      return false;
    });
  }

  #fail(error: Error): void {
    this.#error = error;
    for (const waiter of this.#waiting.splice(0)) waiter.reject(error);
  }
}
