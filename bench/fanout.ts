/**
 * Fan-out: events per second delivered to an attached `troupe observe` process while many agents
 * stream at once. Each agent makes one model call whose answer arrives in `chunks` deltas (no delay),
 * so the run is mostly `model.delta` events. Measured from the first line the observer prints to the
 * line that completes every agent's events. The observer is a real child process with its own NATS
 * connection; the agents and the scripted server share this process, so the live figure is the
 * slower of the agents making events and the observer taking them. A second observer then reads the
 * same log from the start: its rate is what an observer takes when the agents are not the limit.
 * Then a flood of events appended as fast as the log acks them, and a burst of them published by a
 * process of its own without waiting for acks, each with one observer attached (and the others
 * stopped: every observer follows every run, and takes its share of the two cores).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { NatsBus } from "../src/bus/nats-bus.js";
import type { Envelope } from "../src/events/envelope.js";
import { ScriptedModelServer } from "../src/testing/scripted-model-server.js";
import { floodEvents } from "./flood.js";
import { troupe } from "./overhead.js";
import { stopChild } from "./processes.js";

export interface FanoutResult {
  /** Events of this run set the observer printed. */
  events: number;
  /** Events per second at the observer attached while the agents streamed. */
  live: number;
  /** Events per second at an observer reading the same log from its start. */
  catchUp: number;
  /** Events of the flood (below) the observer printed. */
  flooded: number;
  /** Events per second at the observer attached while the flood was appended. */
  floodLive: number;
  /** Events per second at an observer reading the whole log (agents' and flood) from its start. */
  floodCatchUp: number;
  /** Events per second the log took the flood at (what the live observer could get at most). */
  floodAppended: number;
  /** Events per second at an observer attached while the burst (below) was published. */
  burstLive: number;
  /** Events per second the burst was published at (core NATS, in a process of its own). */
  burstPublished: number;
}

/**
 * How long an observer that printed its first event is given before a flood: a follower by gets
 * takes what it hears only once it has read the log to its end a second after it subscribed
 * (src/bus/heard-live.ts, SETTLE_MS); one attached just before reads the flood by gets.
 */
const SETTLED_MS = 2000;

async function stopAll(observers: Observer[]): Promise<void> {
  for (const observer of observers.splice(0)) await observer.stop();
}

/** Runs bench/publish-burst.ts in a process of its own; resolves with its events per second. */
function publishBurst(url: string, prefix: string, runs: number, perRun: number): Promise<number> {
  const script = fileURLToPath(new URL("./publish-burst.js", import.meta.url));
  const child = spawn(process.execPath, [script, url, prefix, String(runs), String(perRun)], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  child.stdout?.on("data", (chunk) => (out += chunk));
  return new Promise((resolve, fail) =>
    child.once("exit", (code) =>
      code === 0
        ? resolve((JSON.parse(out) as { published: number }).published)
        : fail(new Error(`publish-burst exited (${code})`)),
    ),
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A `troupe observe` printing JSON lines, counting those of `runIds` as they arrive. */
class Observer {
  readonly child: ChildProcess;
  count = 0;
  firstAt = 0;
  lastAt = 0;
  /** Each run has one agent and `agent.stopped` is its last event: seq + 1 of those, summed. */
  #stopped = 0;
  #total = 0;
  #stderr = "";
  readonly exited: Promise<never>;
  readonly complete: Promise<void>;
  /** Runs started only to learn that the observer follows the log; their events are not counted. */
  readonly probes = new Set<string>();
  #probed = false;

  constructor(troupeBin: string, dir: string, url: string, runIds: ReadonlySet<string>, args: string[]) {
    this.child = spawn(process.execPath, [troupeBin, "--config", join(dir, "config"), "observe", ...args], {
      cwd: dir,
      env: { ...process.env, NATS_URL: url, TROUPE_DATA_DIR: join(dir, ".data") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.child.stderr?.on("data", (chunk) => (this.#stderr += chunk));
    this.exited = new Promise<never>((_, fail) =>
      this.child.once("exit", (code) => fail(new Error(`troupe observe exited (${code}): ${this.stderr}`))),
    );
    this.exited.catch(() => {}); // raced below; it also rejects on our own SIGTERM at the end
    let partial = "";
    let done: () => void = () => {};
    this.complete = new Promise<void>((resolve) => (done = resolve));
    this.child.stdout?.setEncoding("utf8");
    this.child.stdout?.on("data", (chunk: string) => {
      const now = performance.now();
      const lines = (partial + chunk).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) {
        const event = JSON.parse(line) as { runId: string; type: string; seq: number };
        if (this.probes.has(event.runId)) this.#probed = true;
        if (!runIds.has(event.runId)) continue;
        if (this.count++ === 0) this.firstAt = now;
        this.lastAt = now;
        if (event.type === "agent.stopped") {
          this.#total += event.seq + 1;
          if (++this.#stopped === runIds.size && this.count >= this.#total) done();
        }
      }
      if (runIds.size > 0 && this.#stopped === runIds.size && this.count >= this.#total) done();
    });
  }

  /** Whether an event of a probe run was printed, waiting up to `ms` for one. */
  async sawProbe(ms: number): Promise<boolean> {
    for (const deadline = Date.now() + ms; !this.#probed && Date.now() < deadline; ) await sleep(10);
    return this.#probed;
  }

  get stderr(): string {
    return this.#stderr.trim();
  }

  /** Waits for every run's events, failing when none arrive for 10 s; returns events per second. */
  async rate(): Promise<number> {
    for (let seen = -1; seen !== this.count; ) {
      seen = this.count;
      const stalled = sleep(10_000).then(() => "stalled");
      if ((await Promise.race([this.complete, stalled, this.exited])) !== "stalled") {
        if (this.count !== this.#total)
          throw new Error(`observer printed ${this.count} events, the runs made ${this.#total}`);
        return this.count / ((this.lastAt - this.firstAt) / 1000);
      }
    }
    throw new Error(`observer stalled after ${this.count} events`);
  }

  stop(): Promise<void> {
    return stopChild(this.child);
  }
}

export async function measureFanout(options: {
  troupeBin: string;
  url: string;
  prefix: string;
  agents: number;
  chunks: number;
  /** The flood: this many runs of `floodPerRun` events each. */
  floodRuns: number;
  floodPerRun: number;
}): Promise<FanoutResult> {
  const { troupeBin, url, prefix, agents, chunks, floodRuns, floodPerRun } = options;
  // "word " × chunks splits into exactly `chunks` deltas of five characters.
  const server = await ScriptedModelServer.start([
    { reply: { text: "word ".repeat(chunks), chunks }, times: Number.POSITIVE_INFINITY },
  ]);
  const dir = mkdtempSync(join(tmpdir(), "troupe-bench-fanout-"));
  // The observer reads the prefix from its own config dir, the URL from NATS_URL.
  mkdirSync(join(dir, "config"));
  writeFileSync(join(dir, "config/troupe.yaml"), `nats:\n  prefix: ${prefix}\n`);
  const bus = await NatsBus.connect({ url, prefix });
  const { runtime } = troupe(server.baseURL, bus);
  const observers: Observer[] = [];
  try {
    await runtime.open(); // the event stream exists before the observer looks for it
    const runIds = new Set<string>();
    const live = new Observer(troupeBin, dir, url, runIds, []);
    observers.push(live);
    // Attached = the observer prints what is stored after it began following. observe prints nothing
    // when ready, and --from-start would hide a late attach by replaying a backlog, so a probe run is
    // started every 200 ms until the observer prints an event of one of them.
    const attached = async (observer: Observer) => {
      for (const deadline = Date.now() + 10_000; Date.now() < deadline; ) {
        const probe = runtime.start({ task: "say hello" });
        observer.probes.add(probe.runId);
        await probe.done;
        if (await observer.sawProbe(200)) return;
      }
      throw new Error(`troupe observe never attached: ${observer.stderr}`);
    };
    await Promise.race([attached(live), live.exited]);

    // Every agent at once; start() is synchronous, so the run ids are known before any line arrives.
    const handles = Array.from({ length: agents }, () => runtime.start({ task: "say hello" }));
    for (const handle of handles) runIds.add(handle.runId);
    const outputs = await Promise.race([Promise.all(handles.map((h) => h.done)), live.exited]);
    const failed = outputs.filter((output) => output.reason !== "done").length;
    if (failed > 0) throw new Error(`${failed} of ${agents} agents did not finish`);
    const liveRate = await live.rate();

    const replay = new Observer(troupeBin, dir, url, runIds, ["--from-start"]);
    observers.push(replay);
    const catchUp = await replay.rate();
    // One observer at a time from here: every one attached follows every run, and takes its share
    // of two cores.
    await stopAll(observers);

    // The flood, appended 512 at a time as fast as the log takes them while the observer follows.
    const flood = floodEvents(floodRuns, floodPerRun);
    const floodIds = new Set(flood.map((event) => event.runId));
    const attachedToFlood = new Observer(troupeBin, dir, url, floodIds, []);
    observers.push(attachedToFlood);
    await Promise.race([attached(attachedToFlood), attachedToFlood.exited]);
    await sleep(SETTLED_MS);
    const appending = performance.now();
    // Four appends of 256 in flight at once, each of one run's next events in order.
    const batches: Envelope[][] = [];
    for (let at = 0; at < flood.length; at += 256) batches.push(flood.slice(at, at + 256));
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        for (let batch = batches.shift(); batch; batch = batches.shift()) await bus.eventLog.appendAll(batch);
      }),
    );
    const floodAppended = flood.length / ((performance.now() - appending) / 1000);
    const floodLive = await attachedToFlood.rate();
    await stopAll(observers);
    const whole = new Observer(troupeBin, dir, url, floodIds, ["--from-start"]);
    observers.push(whole);
    const floodCatchUp = await whole.rate();
    await stopAll(observers);

    // The burst: the flood's events again (runs of their own), published by a process of its own as
    // fast as NATS takes them, no ack awaited (the log stores each all the same).
    const burstIds = new Set(floodEvents(floodRuns, 1, "run-burst").map((event) => event.runId));
    const attachedToBurst = new Observer(troupeBin, dir, url, burstIds, []);
    observers.push(attachedToBurst);
    await Promise.race([attached(attachedToBurst), attachedToBurst.exited]);
    await sleep(SETTLED_MS);
    const publishing = publishBurst(url, prefix, floodRuns, floodPerRun);
    const burstLive = await attachedToBurst.rate();
    const burstPublished = await publishing;
    return {
      events: live.count,
      live: liveRate,
      catchUp,
      flooded: attachedToFlood.count,
      floodLive,
      floodCatchUp,
      floodAppended,
      burstLive,
      burstPublished,
    };
  } finally {
    for (const observer of observers) await observer.stop();
    await runtime.close();
    await bus.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
