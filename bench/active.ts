/**
 * Active agents: 1,000 agents at once, each inside its model call (the scripted model answers after
 * 5 s), measured after a GC: RSS and V8 heap growth per agent. Beside it, the floor: the same number
 * of bare openai SDK streams left open the same way. Each in a process of its own (with
 * --expose-gc), the model server in another.
 */
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { NatsBus } from "../src/bus/nats-bus.js";
import { startModelProcess } from "./model-process.js";
import { troupe } from "./overhead.js";
import { measureApart, whenRunAsScript } from "./processes.js";

export interface ActiveResult {
  /** RSS growth per open agent (or stream), after a GC, in KB. */
  rssPerAgentKb: number;
  heapPerAgentKb: number;
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
    global.gc?.();
    const before = process.memoryUsage();
    const handles = Array.from({ length: count }, () => start());
    const streams = runtime ? [] : Array.from({ length: count }, () => stream());
    await sleep(2500); // every request is open; none is answered before 5 s
    global.gc?.();
    const during = process.memoryUsage();
    for (const handle of handles) handle?.abort("bench over");
    await Promise.all([...handles.map((handle) => handle?.done), ...streams]);
    return {
      rssPerAgentKb: (during.rss - before.rss) / 1024 / count,
      heapPerAgentKb: (during.heapUsed - before.heapUsed) / 1024 / count,
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
