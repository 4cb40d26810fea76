/**
 * The client's side of a run through the daemon, as `troupe run` makes one: it picks the run's id,
 * follows the run's events from before it starts, asks the daemon's API to start it (a NATS
 * request), and reads until its first agent stops. Run as a script with an IPC channel, it is that
 * client in a process of its own, as `troupe run` is: one run per message, answered with its wall time.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { newRunId } from "../src/actors/run-ids.js";
import type { Bus } from "../src/bus/bus.js";
import { followRun } from "../src/bus/follow-run.js";
import { NatsBus } from "../src/bus/nats-bus.js";
import { makeEnvelope } from "../src/events/envelope.js";
import { stopChild } from "./processes.js";

export async function runThroughDaemon(bus: Bus): Promise<void> {
  const runId = newRunId();
  const events = followRun(bus, runId)[Symbol.asyncIterator]();
  const first = events.next();
  await bus.request(
    bus.subjects.api("runs.start"),
    makeEnvelope({ runId, agentId: "cli", seq: 0, type: "runs.start", data: { task: "say hello", runId } }),
  );
  for (let next = await first; !next.done; next = await events.next()) {
    if (next.value.type === "agent.stopped" && next.value.parentId === undefined) break;
  }
  await events.return?.();
}

/** The client in a process of its own; `run()` resolves with the wall time it measured there. */
export async function clientApart(
  url: string,
  prefix: string,
): Promise<{ run: () => Promise<number>; close: () => Promise<void> }> {
  const child = fork(fileURLToPath(import.meta.url), [url, prefix], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  let answer: ((message: unknown) => void) | undefined;
  child.on("message", (message) => answer?.(message));
  const next = () => new Promise<unknown>((resolve) => (answer = resolve));
  await next(); // ready
  return {
    run: async () => {
      const answered = next();
      child.send("run");
      return (await answered) as number;
    },
    close: async () => {
      child.send("stop");
      await stopChild(child);
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [url = "", prefix = ""] = process.argv.slice(2);
  const bus = await NatsBus.connect({ url, prefix });
  process.on("message", async (message) => {
    if (message === "run") {
      const started = performance.now();
      await runThroughDaemon(bus);
      process.send?.(performance.now() - started);
    } else if (message === "stop") {
      await bus.close();
      process.disconnect();
    }
  });
  process.send?.("ready");
}
