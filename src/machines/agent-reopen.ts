import type { Snapshot } from "xstate";
import { TroupeError } from "../errors.js";
import { agentMachine } from "./agent-machine.js";
import type { AgentContext } from "./agent-types.js";

/** A snapshot that cannot be reopened: it is not of a stopped agent. */
export class NotStoppedError extends TroupeError {
  override name = "NotStoppedError";
}

/**
 * The one way out of `stopped`, for `resume` with an instruction to go on: a stopped agent's persisted
 * snapshot, back in `idle` with the same conversation, budget use and queues, where a START (the
 * instruction) takes it on. XState takes no event in a top-level final state, and `stopped` stays
 * final (it is what makes the agent's output), so the machine makes this state itself
 * (`resolveState`) rather than anyone editing its snapshot. The format is the machine's persisted
 * snapshot, as before.
 */
export function reopen(persisted: unknown): Snapshot<unknown> {
  const stopped = persisted as { status?: unknown; value?: unknown; context?: AgentContext };
  if (stopped.status !== "done" || stopped.value !== "stopped" || !stopped.context)
    throw new NotStoppedError(`only a stopped agent can be reopened (this one is ${String(stopped.value)})`);
  const { context } = stopped;
  const state = agentMachine.resolveState({
    value: "idle",
    // What ended it, and the last call it was making, are behind it.
    context: { ...context, stop: null, finalizing: null, batch: [] },
  });
  return agentMachine.getPersistedSnapshot(state);
}
