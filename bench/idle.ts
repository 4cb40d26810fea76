/**
 * Idle agents: many agents hosted at once in one runtime, each waiting and doing nothing. Measured:
 * RSS and heap growth per agent. The waiting state is `awaitingApproval` on an approver that never
 * answers (people away from their terminals), where a daemon's agents can sit for hours. Its model
 * call is over, so it holds no socket, and nothing of its own ticks (the approver only listens for
 * the abort). Left is what the host keeps: the machine actor and its conversation, the control
 * subscription, the event publisher, XState's wall-budget delay, the snapshot in KV and the events
 * in the log (in this process on a LocalBus, in nats-server on NATS). Not chosen: a model call
 * parked on a slow reply (an open request each: busy, not idle), and `idle`, which the host leaves
 * at once with START. Agents start in waves so their model calls share a few keep-alive sockets,
 * which we let close before sampling; the scripted server's record of requests is cleared.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import type { AgentHandle } from "../src/actors/agent-deps.js";
import type { Approver } from "../src/approvals/approver.js";
import type { Bus } from "../src/bus/bus.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { defineTool, type Tool } from "../src/tools/tool.js";
import { startModelProcess } from "./model-process.js";
import { benchRuntime } from "./overhead.js";
import { measureApart, whenRunAsScript } from "./processes.js";

export interface IdleResult {
  agents: number;
  /** (RSS with every agent waiting − RSS before) / agents, in KB. */
  rssPerAgentKb: number;
  /** The same for V8's used heap, after a GC when node runs with --expose-gc. */
  heapPerAgentKb: number;
}

/** Agents started at once; the next wave starts when every one of these is waiting. */
const WAVE = 100;

/** A write tool: under the `ask` policy every call of it waits for an approval. */
const note = defineTool({
  name: "note",
  description: "Writes a note.",
  effect: "write",
  parameters: z.object({ text: z.string() }),
  execute: () => ({ ok: true, output: "noted" }),
}) as Tool;

export async function measureIdle(count: number, bus: Bus): Promise<IdleResult> {
  const server = await startModelProcess("note-call");
  let asked = 0;
  // Never answers; honours the signal as an approver must, so an abort still stops the agent.
  const approver: Approver = {
    decide: (_request, signal) => {
      asked++;
      return new Promise((_, reject) =>
        signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
      );
    },
  };
  const runtime = benchRuntime(server.baseURL, bus, note, { agent: { approval: "ask" }, approver });
  await runtime.open();
  const snapshots = await bus.kv("snapshots");
  const handles: AgentHandle[] = [];
  const wave = async (n: number) => {
    const target = asked + n;
    for (let i = 0; i < n; i++) handles.push(runtime.start({ task: "write a note" }));
    while (asked < target) await sleep(5);
  };
  // Waiting, and saved so: each agent's stored snapshot (keys `<runId>.<agentId>`) says awaitingApproval.
  const settled = async () => {
    for (const handle of handles) {
      for (;;) {
        const record = await snapshots.get<{ snapshot: { value: unknown } }>(
          `${handle.runId}.${handle.agentId}`,
        );
        if (record?.value.snapshot.value === "awaitingApproval") break;
        await sleep(10);
      }
    }
    await bus.flush();
    global.gc?.();
    return process.memoryUsage();
  };
  try {
    await wave(1); // warm up: modules, sockets, streams, buckets; this agent stays in the baseline
    const before = await settled();
    for (let started = 0; started < count; started += WAVE) await wave(Math.min(WAVE, count - started));
    // The model is not needed any more: its going closes the sockets the waves opened to it.
    await server.stop();
    await sleep(200);
    const after = await settled();
    return {
      agents: count,
      rssPerAgentKb: (after.rss - before.rss) / 1024 / count,
      heapPerAgentKb: (after.heapUsed - before.heapUsed) / 1024 / count,
    };
  } finally {
    for (const handle of handles) handle.abort("bench over");
    await Promise.all(handles.map((handle) => handle.done));
    await runtime.close();
    await server.stop();
  }
}

/** `measureIdle` on NATS in a fresh process (see `measureApart`). */
export const measureIdleApart = (count: number, url: string, prefix: string) =>
  measureApart<IdleResult>(import.meta.url, [String(count), url, prefix]);

await whenRunAsScript(
  import.meta.url,
  async ([count = "1000", url = "nats://127.0.0.1:4222", prefix = "benchidle"]) => {
    const bus = await NatsBus.connect({ url, prefix });
    try {
      return await measureIdle(Number(count), bus);
    } finally {
      await bus.close();
    }
  },
);
