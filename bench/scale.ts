/**
 * Scale: many agents at once in one runtime (the daemon's shape), each three turns (a tool call, a
 * tool call, an answer) against a scripted model that takes 20 ms per reply. Measured: wall time, and
 * peak RSS growth per agent. The scripted server runs in a process of its own, so the growth is the
 * agents' own: their machines, conversations, events, and their side of each open request.
 * Beside Troupe, measured the same way: the peer (@openai/agents) and the raw openai SDK loop.
 */
import type { Bus } from "../src/bus/bus.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { startModelProcess } from "./model-process.js";
import { openaiAgents, rawLoop, troupe } from "./overhead.js";
import { measureApart, whenRunAsScript } from "./processes.js";

/** Troupe on NATS, the peer (@openai/agents), or the raw openai SDK loop (the floor). */
export type ScaleKind = "troupe" | "peer" | "sdk";

export interface ScaleResult {
  agents: number;
  wallMs: number;
  /** (peak RSS during the run − RSS before it) / agents, in KB. */
  rssPerAgentKb: number;
  /** V8 heap in use after a GC with nine tenths of the agents mid-run, per such agent, in KB. */
  liveHeapPerAgentKb: number;
  finished: number;
}

/** One three-turn run of `kind`, resolving with whether it did its three turns. */
async function runner(
  kind: ScaleKind,
  baseURL: string,
  bus: Bus | undefined,
): Promise<{ once: () => Promise<boolean>; close: () => Promise<void> }> {
  if (kind === "troupe") {
    if (!bus) throw new Error("scale: Troupe runs on a bus");
    const { runtime } = troupe(baseURL, bus);
    await runtime.open();
    return {
      once: async () => {
        const output = await runtime.start({ task: "say hello" }).done;
        return output.reason === "done" && output.turns === 3;
      },
      close: () => runtime.close(),
    };
  }
  // A thousand connections at once meet the server closing idle ones; the SDK retries that by default.
  const loop =
    kind === "peer" ? openaiAgents(baseURL, { maxRetries: 2 }) : rawLoop(baseURL, { maxRetries: 2 });
  return { once: () => loop().then(() => true), close: async () => {} };
}

export async function measureScale(kind: ScaleKind, agents: number, bus?: Bus): Promise<ScaleResult> {
  const server = await startModelProcess("three-turns-20ms");
  const { once, close } = await runner(kind, server.baseURL, bus);
  try {
    await once(); // warm up: modules, sockets, streams
    global.gc?.();
    const before = process.memoryUsage();
    let peak = before.rss;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage.rss());
    }, 5);
    const started = performance.now();
    // When a tenth have finished, the rest are mid-run: what they keep alive is measured after a GC.
    let finished = 0;
    let liveHeapPerAgentKb = Number.NaN;
    const outputs = await Promise.all(
      Array.from({ length: agents }, () =>
        once().then((didThreeTurns) => {
          if (++finished === Math.ceil(agents / 10) && global.gc) {
            global.gc();
            liveHeapPerAgentKb =
              (process.memoryUsage().heapUsed - before.heapUsed) / 1024 / (agents - finished);
          }
          return didThreeTurns;
        }),
      ),
    );
    const wallMs = performance.now() - started;
    clearInterval(sampler);
    peak = Math.max(peak, process.memoryUsage.rss());
    return {
      agents,
      wallMs,
      rssPerAgentKb: (peak - before.rss) / 1024 / agents,
      liveHeapPerAgentKb,
      finished: outputs.filter(Boolean).length,
    };
  } finally {
    await close();
    await server.stop();
  }
}

/** `measureScale` in a fresh process (see `measureApart`); Troupe on NATS. */
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
