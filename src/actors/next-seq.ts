import type { Bus } from "../bus/bus.js";

/**
 * The seq an agent's next event gets: after the last of its events in the log, and at least `from`
 * (a snapshot's). Events made after the last snapshot are in the log already: a host that carries
 * the agent on goes on after them, without a gap or a repeat.
 */
export async function nextSeqOf(bus: Bus, runId: string, agentId: string, from = 0): Promise<number> {
  let next = from;
  for await (const { envelope } of bus.eventLog.read({ runId }))
    if (envelope.agentId === agentId) next = Math.max(next, envelope.seq + 1);
  return next;
}
