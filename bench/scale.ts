/**
 * Scale: 1,000 subagents at once in one runtime on NATS (the daemon's shape): ten leads, each of which
 * spawns a hundred workers in one model reply; each worker does three turns (a tool call, a tool call,
 * an answer) against a scripted model that takes 20 ms per reply. Measured: wall time, and peak RSS
 * growth per agent. The scripted server runs in a process of its own, so the growth is the agents'
 * own: their machines, conversations, events, and their side of each open request. Beside Troupe,
 * measured the same way: 1,000 three-turn runs on the peer (@openai/agents) and on the raw openai SDK
 * loop.
 */
import type { Bus } from "../src/bus/bus.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import type { AgentOutput } from "../src/machines/agent-types.js";
import { startModelProcess, WORKERS_PER_LEAD } from "./model-process.js";
import { benchRuntime, echoTool, openaiAgents, rawLoop } from "./overhead.js";
import { measureApart, whenRunAsScript } from "./processes.js";

/** Troupe on NATS, the peer (@openai/agents), or the raw openai SDK loop (the floor). */
export type ScaleKind = "troupe" | "peer" | "sdk";

export interface ScaleResult {
  /** Agents started at once, in whole runs (a Troupe run: a lead and its workers). */
  agents: number;
  wallMs: number;
  /** (peak RSS during the run − RSS before it) / agents, in KB. */
  rssPerAgentKb: number;
  /** Agents that did their three turns. */
  finished: number;
}

interface Runner {
  /** Agents in one run. */
  perRun: number;
  /** One run, resolving with how many of its agents did their three turns. */
  once: () => Promise<number>;
  close: () => Promise<void>;
}

/**
 * The agents of a lead's run that did their three turns: the lead, when done, and its workers (a
 * worker's two tool calls show it did its three turns: the lead's spend counts its subtree's).
 */
export function agentsDone(output: AgentOutput): number {
  if (output.reason !== "done") return 0;
  return 1 + Math.min(WORKERS_PER_LEAD, (output.total.toolCalls - output.toolCalls) / 2);
}

/**
 * Troupe: a run is a lead spawning `WORKERS_PER_LEAD` read-only workers. The peer and the SDK loop:
 * a run is one three-turn agent.
 */
async function runner(kind: ScaleKind, baseURL: string, bus: Bus | undefined): Promise<Runner> {
  if (kind === "troupe") {
    if (!bus) throw new Error("scale: Troupe runs on a bus");
    const runtime = benchRuntime(baseURL, bus, echoTool, {
      agent: { tools: [], subagents: ["worker"] },
      others: { worker: { readOnly: true } },
      troupe: { subagents: { maxConcurrent: WORKERS_PER_LEAD } },
    });
    await runtime.open();
    return {
      perRun: WORKERS_PER_LEAD + 1,
      once: async () => agentsDone(await runtime.start({ task: "have the workers echo" }).done),
      close: () => runtime.close(),
    };
  }
  // A thousand connections at once meet the server closing idle ones; the SDK retries that by default.
  const loop =
    kind === "peer" ? openaiAgents(baseURL, { maxRetries: 2 }) : rawLoop(baseURL, { maxRetries: 2 });
  return { perRun: 1, once: () => loop().then(() => 1), close: async () => {} };
}

/** `agents` agents at once, in runs of `kind`, against the scripted model in a process of its own. */
export async function measureScale(kind: ScaleKind, agents: number, bus?: Bus): Promise<ScaleResult> {
  const server = await startModelProcess(kind === "troupe" ? "lead-and-workers-20ms" : "three-turns-20ms");
  const { perRun, once, close } = await runner(kind, server.baseURL, bus);
  const runs = Math.ceil(agents / perRun);
  try {
    await once(); // warm up: modules, sockets, streams
    global.gc?.();
    const before = process.memoryUsage();
    let peak = before.rss;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 5);
    const started = performance.now();
    const finished = await Promise.all(Array.from({ length: runs }, () => once()));
    const wallMs = performance.now() - started;
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage.rss());
    return {
      agents: runs * perRun,
      wallMs,
      rssPerAgentKb: (peak - before.rss) / 1024 / (runs * perRun),
      finished: finished.reduce((sum, n) => sum + n, 0),
    };
  } finally {
    await close();
    await server.stop();
  }
}

/** `measureScale` in a fresh process (see `measureApart`); Troupe's runs on NATS at `url`. */
export const measureScaleApart = (kind: ScaleKind, agents: number, url: string, prefix: string) =>
  measureApart<ScaleResult>(import.meta.url, [kind, String(agents), url, prefix]);

await whenRunAsScript(
  import.meta.url,
  async ([kind = "troupe", agents = "1000", url = "nats://127.0.0.1:4222", prefix = "benchscale"]) => {
    const bus = kind === "troupe" ? await NatsBus.connect({ url, prefix }) : undefined;
    try {
      return await measureScale(kind as ScaleKind, Number(agents), bus);
    } finally {
      await bus?.close();
    }
  },
);
