import { isEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import { sentByAWorker } from "./intake.js";

/** What a reader has let through of one agent's events. */
interface AgentSeen {
  /** The highest epoch of the agent let through. */
  epoch: number;
  /** The lowest seq not yet let through. */
  next: number;
  /** Seqs above `next` let through (an event whose append was retried lands after later ones). */
  above: Set<number> | undefined;
  /** The highest seq let through. */
  top: number;
  /** The run's first agent, as the daemon said (`agent.started` with no parent): no worker's. */
  first?: true;
}

/**
 * What a reader of the event log lets through: each agent's event of a seq once, and nothing from
 * a host that has lost the agent to another. A worker that takes an agent over stamps its events
 * with a higher epoch and says so at once (`agent.resumed`), so what the old host still sends when
 * its link comes back (buffered publishes, a model call that finished late) lands after that and is
 * dropped here. One map lookup per event: every client reads every event of a run.
 *
 * Workers host subagents, never a run's first agent: an event a worker sent (`sentByAWorker`) with
 * no parent, of the first agent, or saying it started one, is dropped before it counts, so a
 * worker's seed can neither end a run with a result of its own nor take the seqs of the events to
 * come (a reader from now, which has not seen who the first agent is, drops those with no parent). The first
 * agent's id is random, so nobody can send an event of it before the daemon's `agent.started` has
 * been stored, and a reader from the start sees that first.
 */
export class EventFilter {
  readonly #runs = new Map<string, Map<string, AgentSeen>>();
  #lastRunId = "";
  #lastRun: Map<string, AgentSeen> | undefined;

  /**
   * `fromStart`: the reader sees each agent's events from its first (seq 0). A reader that joins
   * later (live events from now) takes an agent's first event it sees as where it starts: it would
   * otherwise hold on to every seq it sees, waiting for the ones before.
   */
  constructor(private readonly fromStart = true) {}

  /** False for an event of an older epoch than one let through for its agent, or of a seq let through. */
  accept(envelope: Envelope): boolean {
    const run = this.#run(envelope.runId);
    let seen = run.get(envelope.agentId);
    const started = isEvent(envelope, "agent.started") && envelope.data.parentId === undefined;
    if (sentByAWorker(envelope) && (envelope.parentId === undefined || started || seen?.first)) return false;
    if (!seen) {
      seen = { epoch: 0, next: this.fromStart ? 0 : envelope.seq, above: undefined, top: -1 };
      run.set(envelope.agentId, seen);
    }
    const epoch = envelope.epoch ?? 0;
    if (epoch < seen.epoch) return false;
    seen.epoch = epoch;
    const { seq } = envelope;
    if (seq < seen.next || seen.above?.has(seq)) return false;
    if (started) seen.first = true;
    if (seq > seen.top) seen.top = seq;
    if (seq > seen.next) {
      seen.above ??= new Set();
      seen.above.add(seq);
      return true;
    }
    let next = seq + 1;
    while (seen.above?.delete(next)) next++;
    seen.next = next;
    return true;
  }

  /**
   * Whether this event, taken now, leaves none of its agent's before it unseen: its seq is at most
   * one past the highest let through (for a reader from the start, an agent not seen yet begins at
   * 0). An event heard live that does not follow means something was missed, or is still to be
   * stored (a retried append lands after later ones): the log is read again.
   */
  follows(envelope: Envelope): boolean {
    const seen = this.#run(envelope.runId).get(envelope.agentId);
    if (!seen) return !this.fromStart || envelope.seq === 0;
    return envelope.seq <= seen.top + 1;
  }

  /** The lowest seq of the agent not yet let through (for a reader from the start). */
  next(runId: string, agentId: string): number {
    return this.#run(runId).get(agentId)?.next ?? 0;
  }

  #run(runId: string): Map<string, AgentSeen> {
    let run = this.#lastRunId === runId ? this.#lastRun : this.#runs.get(runId);
    if (!run) {
      run = new Map();
      this.#runs.set(runId, run);
    }
    this.#lastRunId = runId;
    this.#lastRun = run;
    return run;
  }
}
