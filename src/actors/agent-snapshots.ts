import type { Logger } from "../log.js";
import { AGENT_MACHINE_VERSION, failedOutput, totalSpend } from "../machines/agent-machine.js";
import type { AgentOutput } from "../machines/agent-types.js";
import type { Redactor } from "../safety/redact.js";
import type { CommandHooks } from "../tools/command-hooks.js";
import { AGENT_RECORD_VERSION, type AgentRecord, type AgentStore } from "./agent-store.js";
import type { EventPublisher } from "./event-publisher.js";
import type { HostedMachines } from "./hosted-machine.js";

/** A hosted agent machine's actor. */
export type AgentActor = ReturnType<HostedMachines["host"]>["actor"];

/** What a record says besides the machine's snapshot: the agent's facts and rights (see `Runtime.resume`). */
export type RecordFacts = Omit<
  AgentRecord,
  "v" | "machineVersion" | "nextSeq" | "elapsedMs" | "snapshot" | "done"
>;

/**
 * Writes an agent's record to the store at each change of state. A record is written only after the
 * events made before it are in the log: it never claims a seq the log lacks, so a resumed agent
 * carries on without a gap. It is taken when its turn to be written comes: of several state changes
 * during one write, only the last is taken.
 */
export class SnapshotWriter {
  #detached = false;

  constructor(
    private readonly actor: AgentActor,
    private readonly parts: {
      store: AgentStore | undefined;
      events: EventPublisher;
      redactor: Redactor;
      facts: RecordFacts;
      /** The time the agent has worked, counting what it had before a resume (waits for people left out). */
      workedMs: () => number;
      /** Told once when a write conflicted (another host took the agent over); nothing more is written. */
      moved: () => void;
    },
  ) {}

  save(): void {
    const { store, events, facts } = this.parts;
    if (!store || this.#detached) return;
    void store
      .save(facts.runId, facts.agentId, async () => {
        if (this.#detached) return undefined;
        const record = this.#record();
        await events.flushed();
        return record;
      })
      .then((owned) => {
        if (owned || this.#detached) return;
        this.#detached = true;
        this.parts.moved();
      });
  }

  /** Another host takes the agent over: nothing more is written from here. */
  detach(): void {
    this.#detached = true;
  }

  /** The machine's persisted snapshot, redacted like everything else that leaves the process. */
  persisted(): unknown {
    return this.parts.redactor.redactDeep(this.actor.getPersistedSnapshot());
  }

  #record(): AgentRecord {
    return {
      v: AGENT_RECORD_VERSION,
      machineVersion: AGENT_MACHINE_VERSION,
      ...this.parts.facts,
      nextSeq: this.parts.events.nextSeq,
      elapsedMs: this.parts.workedMs(),
      snapshot: this.persisted(),
      done: this.actor.getSnapshot().status === "done",
    };
  }
}

/**
 * Turns an agent's snapshots into its events (`state.changed`, `usage.updated`, `agent.stopped`),
 * telling `changed` of each new state; resolves with its output once it has stopped and every event
 * is in the log. `stopped` is told first, with the reason (to let go of the agent, close its approvals).
 */
export function reportSnapshots(
  actor: AgentActor,
  parts: {
    events: EventPublisher;
    log: Logger;
    commandHooks: CommandHooks | undefined;
    agent: { runId: string; agentId: string; name: string };
    changed: () => void;
    stopped: (reason: string) => Promise<void>;
  },
): Promise<AgentOutput> {
  const { events, agent } = parts;
  // A resumed agent starts in its restored state: entering it again is not a transition.
  let state = String(actor.getSnapshot().value);
  let reported = JSON.stringify(totalSpend(actor.getSnapshot().context));
  return new Promise<AgentOutput>((resolve) => {
    const finish = (output: AgentOutput) => {
      const closed = parts.stopped(output.reason);
      events.emit("agent.stopped", { ...output });
      void Promise.all([events.flushed(), closed]).then(() => resolve(output));
    };
    actor.subscribe({
      next: (snapshot) => {
        const next = String(snapshot.value);
        if (next !== state) {
          events.emit("state.changed", { from: state, to: next });
          state = next;
          parts.changed();
        }
        const spend = totalSpend(snapshot.context);
        const key = JSON.stringify(spend);
        if (key !== reported) {
          reported = key;
          events.emit("usage.updated", {
            usage: spend.usage,
            toolCalls: spend.toolCalls,
            turns: snapshot.context.turns,
          });
        }
        if (snapshot.status === "done" && snapshot.output) {
          const output = snapshot.output;
          finish(output);
          void parts.commandHooks?.notify("agentStop", agent.name, {
            runId: agent.runId,
            agentId: agent.agentId,
            reason: output.reason,
            result: output.result,
          });
          parts.log.debug({ reason: output.reason, turns: output.turns }, "agent stopped");
        }
      },
      error: (error) => {
        parts.log.error({ err: error }, "the agent machine failed");
        finish(failedOutput(actor.getSnapshot().context, error));
      },
    });
  });
}
