/* How a resumed parent finds again a child it had started before the crash. */
import type { Bus } from "../bus/bus.js";
import { isEvent } from "../events/agent-events.js";
import { persistedFacts } from "../machines/agent-persisted.js";
import type { AgentOutput } from "../machines/agent-types.js";
import { type AgentStore, IncompatibleRecordError } from "./agent-store.js";
import { actorKey } from "./placement.js";

/** A child found again: its output when it has stopped, else `running`. */
export type AdoptedChild = { stopped: AgentOutput } | { running: true };

/**
 * A child that a resumed parent had started before the crash: its output when it has stopped, else
 * `running` when a worker hosts it or `resume` brought it back here; undefined when it never got going.
 */
export async function adoptChild(
  bus: Bus,
  agents: AgentStore | undefined,
  runId: string,
  childId: string,
  resume: () => Promise<unknown>,
): Promise<AdoptedChild | undefined> {
  const record = await agents?.load(runId, childId).catch((error) => {
    // Not readable: what its events say decides (below), and a resume rebuilds it from them.
    if (error instanceof IncompatibleRecordError) return { done: false } as const;
    throw error;
  });
  if (!record) return undefined;
  if (record.done) {
    const { output } = persistedFacts(record.snapshot);
    if (output) return { stopped: output };
  }
  for await (const { envelope } of bus.eventLog.read({ runId })) {
    if (envelope.agentId === childId && isEvent(envelope, "agent.stopped")) return { stopped: envelope.data };
  }
  if (await (await bus.kv("actors")).get(actorKey(runId, childId))) return { running: true };
  return (await resume()) ? { running: true } : undefined;
}
