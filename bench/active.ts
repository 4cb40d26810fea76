/**
 * Active agents: 1,000 agents at once, each inside its model call (the scripted model answers after
 * 10 s), measured after a GC: RSS and V8 heap growth per agent; then 1,000 more beside them, measured
 * again. The first thousand's growth holds what a process pays once, whatever the count: V8's young
 * generation grows to about 33 MB under a burst of allocation (1,000 agents started in one tick), and
 * code is compiled on first use; the second thousand's growth is what each more agent costs. Beside
 * it, the floor: bare openai SDK streams left open the same way. Each in a process of its own (with
 * --expose-gc), the model server in another.
 */
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { NatsBus } from "../src/bus/nats-bus.js";
import { startModelProcess } from "./model-process.js";
import { troupe } from "./overhead.js";
import { measureApart, whenRunAsScript } from "./processes.js";

export interface ActiveResult {
  /** RSS growth per open agent (or stream) with the first thousand open, after a GC, in KB. */
  rssPerAgentKb: number;
  heapPerAgentKb: number;
  /** The same for the second thousand, opened beside the first. */
  nextRssPerAgentKb: number;
  nextHeapPerAgentKb: number;
}

type Kind = "troupe" | "sdk";

async function measureActive(kind: Kind, count: number, url: string, prefix: string): Promise<ActiveResult> {
  const server = await startModelProcess("slow-tool-call");
  const bus = kind === "troupe" ? await NatsBus.connect({ url, prefix }) : undefined;
  const client = new OpenAI({ baseURL: server.baseURL, apiKey: "bench", maxRetries: 0 });
  const runtime = bus ? troupe(server.baseURL, bus).runtime : undefined;
  await runtime?.open();
  const stream = async () => {
    const chunks = await client.chat.completions.create({
      model: "scripted",
      messages: [{ role: "user", content: "say hello" }],
      stream: true,
    });
    for await (const _ of chunks);
  };
  const start = () => (runtime ? runtime.start({ task: "say hello" }) : undefined);
  try {
    // Warm up: modules, a socket, the streams and buckets.
    if (runtime) await start()?.done;
    else await stream();
    const handles: Array<ReturnType<typeof start>> = [];
    const streams: Array<Promise<void>> = [];
    // Every request is open 2.5 s after it was made; none is answered before 10 s.
    const open = async () => {
      for (let i = 0; i < count; i++) {
        if (runtime) handles.push(start());
        else streams.push(stream());
      }
      await sleep(2500);
      global.gc?.();
      return process.memoryUsage();
    };
    global.gc?.();
    const before = process.memoryUsage();
    const first = await open();
    const second = await open();
    for (const handle of handles) handle?.abort("bench over");
    await Promise.all([...handles.map((handle) => handle?.done), ...streams]);
    const perAgentKb = (bytes: number) => bytes / 1024 / count;
    return {
      rssPerAgentKb: perAgentKb(first.rss - before.rss),
      heapPerAgentKb: perAgentKb(first.heapUsed - before.heapUsed),
      nextRssPerAgentKb: perAgentKb(second.rss - first.rss),
      nextHeapPerAgentKb: perAgentKb(second.heapUsed - first.heapUsed),
    };
  } finally {
    await runtime?.close();
    await bus?.close();
    await server.stop();
  }
}

/** `measureActive` in a fresh process (see `measureApart`). */
export const measureActiveApart = (kind: Kind, count: number, url: string, prefix: string) =>
  measureApart<ActiveResult>(import.meta.url, [kind, String(count), url, prefix]);

await whenRunAsScript(
  import.meta.url,
  ([kind = "troupe", count = "1000", url = "nats://127.0.0.1:4222", prefix = "benchactive"]) =>
    measureActive(kind as Kind, Number(count), url, prefix),
);
