/**
 * The scale bench's observer, in a process of its own: a plain subscription to every event of a
 * prefix, as a live view takes them. It counts the events and, for each worker's answer the scripted
 * model stamped with the time it sent it (`done@<ms>`), the time from that to the event here. On
 * SIGTERM it prints one JSON line: events, and those latencies' count, median, p99 and max.
 */

import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";

export interface ObserverReport {
  events: number;
  stamped: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

const STAMP = /"text":"done@(\d+)"/;

async function observe(url: string, prefix: string): Promise<void> {
  const nc = await connect({ servers: url, noAsyncTraces: true });
  const latencies: number[] = [];
  let events = 0;
  const decoder = new TextDecoder();
  nc.subscribe(`${prefix}.evt.>`, {
    callback: (_error, msg) => {
      events++;
      if (!msg.subject.includes(".model.delta")) return;
      const stamp = STAMP.exec(decoder.decode(msg.data));
      if (stamp) latencies.push(Date.now() - Number(stamp[1]));
    },
  });
  await nc.flush();
  process.stdout.write("ready\n");
  process.once("SIGTERM", () => {
    latencies.sort((a, b) => a - b);
    const at = (q: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
    const report: ObserverReport = {
      events,
      stamped: latencies.length,
      p50Ms: at(0.5),
      p99Ms: at(0.99),
      maxMs: latencies.at(-1) ?? 0,
    };
    process.stdout.write(`${JSON.stringify(report)}\n`);
    void nc.close().then(() => process.exit(0));
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  await observe(process.argv[2] ?? "nats://127.0.0.1:4222", process.argv[3] ?? "troupe");
