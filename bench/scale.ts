/**
 * Scale: many agents at once in one runtime (the daemon's shape), each three turns (a tool call, a
 * tool call, an answer) against a scripted model that takes 20 ms per reply. Measured: wall time, and
 * peak RSS growth per agent. The scripted server runs in a process of its own, so the growth is the
 * agents' own: their machines, conversations, events, and their side of each open request.
 */
import type { Bus } from "../src/bus/bus.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { startModelProcess } from "./model-process.js";
import { troupe } from "./overhead.js";
import { measureApart, whenRunAsScript } from "./processes.js";

export interface ScaleResult {
  agents: number;
  wallMs: number;
  /** (peak RSS during the run − RSS before it) / agents, in KB. */
  rssPerAgentKb: number;
  /** V8 heap in use after a GC with nine tenths of the agents mid-run, per such agent, in KB. */
  liveHeapPerAgentKb: number;
  finished: number;
}

export async function measureScale(agents: number, bus: Bus): Promise<ScaleResult> {
  const server = await startModelProcess("three-turns-20ms");
  const { runtime, once } = troupe(server.baseURL, bus);
  await runtime.open();
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
        runtime.start({ task: "say hello" }).done.then((output) => {
          if (++finished === Math.ceil(agents / 10) && global.gc) {
            global.gc();
            liveHeapPerAgentKb =
              (process.memoryUsage().heapUsed - before.heapUsed) / 1024 / (agents - finished);
          }
          return output;
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
      finished: outputs.filter((output) => output.reason === "done" && output.turns === 3).length,
    };
  } finally {
    await runtime.close();
    await server.stop();
  }
}

/** `measureScale` on NATS in a fresh process (see `measureApart`). */
export const measureScaleApart = (agents: number, url: string, prefix: string) =>
  measureApart<ScaleResult>(import.meta.url, [String(agents), url, prefix]);

await whenRunAsScript(
  import.meta.url,
  async ([agents = "1000", url = "nats://127.0.0.1:4222", prefix = "benchscale"]) => {
    const bus = await NatsBus.connect({ url, prefix });
    try {
      return await measureScale(Number(agents), bus);
    } finally {
      await bus.close();
    }
  },
);
