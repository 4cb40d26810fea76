import type { Bus, LoggedEvent } from "../../src/bus/bus.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { waitFor } from "./wait.js";

/** A follower of run `runId` on `reader`, reading in the background until `stop`. */
export function follow(reader: Bus, runId: string) {
  const controller = new AbortController();
  const got: LoggedEvent[] = [];
  const reading = (async () => {
    for await (const event of reader.eventLog.read({ runId, follow: true, signal: controller.signal }))
      got.push(event);
  })();
  return {
    got,
    /** The events of one agent, each with `seq` when the log placed it (absent when it was heard). */
    of: (agentId: string) => got.filter((e) => e.envelope.agentId === agentId),
    stop: async () => {
      controller.abort();
      await reading;
    },
  };
}

/**
 * Appends an event of agent `probe` every 100 ms until one reaches the follower as it was published
 * (no place in the log): a follower by gets has read the log to its end and takes what it hears.
 */
export async function untilLive(
  hosts: Bus,
  runId: string,
  got: LoggedEvent[],
  probe = "probe",
): Promise<void> {
  let seq = 0;
  await waitFor(
    "the follower to take events as they are published",
    async () => {
      await hosts.eventLog.append(
        makeEnvelope({ runId, agentId: probe, seq: seq++, type: "tick", data: {} }),
      );
      await new Promise((resolve) => setTimeout(resolve, 100));
      return got.some((e) => e.envelope.agentId === probe && e.seq === undefined);
    },
    10_000,
  );
}
