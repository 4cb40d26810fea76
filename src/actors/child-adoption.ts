/* How a resumed parent finds again a child it had started before the crash or abort. */
import type { Bus } from "../bus/bus.js";
import { isEvent } from "../events/agent-events.js";
import { persistedFacts } from "../machines/agent-persisted.js";
import type { AgentOutput, Spend } from "../machines/agent-types.js";
import { type AgentStore, IncompatibleRecordError } from "./agent-store.js";
import { actorKey } from "./placement.js";

/**
 * A child found again: its output when it has stopped, else `running`; one taken up again after an
 * abort says what it had spent by then (`spent`), which its parent was charged as it spent it.
 */
export type AdoptedChild = { stopped: AgentOutput } | { running: true; spent?: Spend };

/** What an aborted child is told when its parent's call takes it up again. */
export const GO_ON = "Continue the task where you left off.";

/**
 * A child that a resumed parent had started before: its output when it has stopped, else `running`
 * when a worker hosts it or `resume` brought it back here; undefined when it never got going. A
 * child that stopped `aborted` (its parent was) has no answer to give: it is reopened (`resume`
 * with a follow-up), with its conversation, spend and turns, and goes on.
 */
export async function adoptChild(
  bus: Bus,
  agents: AgentStore | undefined,
  runId: string,
  childId: string,
  resume: (followUp?: string) => Promise<unknown>,
): Promise<AdoptedChild | undefined> {
  const record = await agents?.load(runId, childId).catch((error) => {
    // Not readable: what its events say decides (below), and a resume rebuilds it from them.
    if (error instanceof IncompatibleRecordError) return { done: false } as const;
    throw error;
  });
  if (!record) return undefined;
  if (record.done) {
    const { output } = persistedFacts(record.snapshot);
    if (output?.reason === "aborted" && (await resume(GO_ON))) return { running: true, spent: output.total };
    if (output) return { stopped: output };
  }
  const stopped = await lastStop(bus, runId, childId);
  if (stopped) return { stopped };
  if (await (await bus.kv("actors")).get(actorKey(runId, childId))) return { running: true };
  return (await resume()) ? { running: true } : undefined;
}

/** How the child last stopped, from its events; undefined when it has not, or went on after (reopened). */
async function lastStop(bus: Bus, runId: string, childId: string): Promise<AgentOutput | undefined> {
  let stopped: AgentOutput | undefined;
  for await (const { envelope } of bus.eventLog.read({ runId })) {
    if (envelope.agentId !== childId) continue;
    stopped = isEvent(envelope, "agent.stopped") ? envelope.data : undefined;
  }
  return stopped;
}
