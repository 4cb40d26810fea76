import { answerApproval, awaitApproval } from "../approvals/answer-approval.js";
import type { NatsBus } from "../bus/nats-bus.js";
import type { LoadedConfig } from "../config/load.js";
import { dataDir } from "../config/paths.js";
import { type AgentEvent, isEvent } from "../events/agent-events.js";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import type { AgentOutput } from "../machines/agent-types.js";
import { localIdentity } from "../trust/approvers.js";
import { visible, visibleLine } from "../util/visible.js";
import { endIfUnknown, watchDaemon } from "./daemon-contact.js";
import type { Renderer } from "./render.js";
import type { TtyApprover } from "./tty-approver.js";

/** A run's past is read at thousands of events a second: a question asked in it is taken up this long after. */
const PAST_READ_MS = 250;

/** How a client follows one stretch of a daemon's run, from its events, to its first agent's stop. */
export interface DaemonTurn {
  runId: string;
  /** The run's first agent: its `agent.stopped` ends the turn. */
  agentId: string;
  /** The run's events (`followRun`), the first of them already asked for. */
  events: AsyncIterator<Envelope>;
  first: Promise<IteratorResult<Envelope>>;
  renderer: Renderer;
  /** Ends the reading early: the turn is then over, its output undefined. */
  reading: AbortController;
  /** On a terminal, this client is one of the places an approval can be answered; the first answer wins. */
  asker: TtyApprover | undefined;
  /** Writes a status line (lost contact, the daemon back), never glued onto an open question. */
  status: (line: string) => void;
  /** What `via` an answer given here records. */
  via: string;
  /** The events of this turn; default all. Those before are passed to `seen` only. */
  isNew?: (envelope: Envelope) => boolean;
  /** Every event read, shown or not. */
  seen?: (envelope: Envelope) => void;
}

/**
 * Shows a daemon's run as it happens until its first agent stops, answering its approvals on this
 * terminal (`asker`); returns that agent's output, or undefined when the reading was ended first.
 * A daemon that restarted without the run ends it in one line (thrown).
 */
export async function followDaemonTurn(
  bus: NatsBus,
  config: LoadedConfig,
  turn: DaemonTurn,
  log: Logger,
): Promise<AgentOutput | undefined> {
  const { events, renderer, reading, asker, status } = turn;
  const isNew = turn.isNew ?? (() => true);
  // What is asked is the request its host wrote (the record), not the event that announced it.
  const asked = new Set<string>();
  const answerHere = async (envelope: AgentEvent<"approval.requested">) => {
    const { callId } = envelope.data;
    const shown = await awaitApproval(
      bus,
      { runId: envelope.runId, agentId: envelope.agentId, callId },
      reading.signal,
    );
    // Each request once, however many events announce it.
    if (!shown || asked.has(shown.requestId)) return;
    asked.add(shown.requestId);
    const answer = await asker?.decide(shown.request, reading.signal).catch(() => undefined);
    if (!answer) return;
    const { outcome, record, why } = await answerApproval(
      bus,
      localIdentity(dataDir(config.troupe.dataDir)),
      shown,
      { approved: answer.approved, via: turn.via, reason: answer.reason },
    );
    if (outcome === "already-decided")
      process.stderr.write(`  (already ${record?.status} by ${visibleLine(record?.by ?? "someone")})\n`);
    if (outcome === "rejected")
      process.stderr.write(`  (the run's host refused the answer: ${visible(why ?? "")})\n`);
    if (outcome === "changed") process.stderr.write("  (the call was asked again; this answer is void)\n");
  };
  // With nobody to ask here, a question the run waits on is said in one line, with where to answer it.
  const tellWaiting = async (envelope: AgentEvent<"approval.requested">) => {
    const { callId, name } = envelope.data;
    const pending = await awaitApproval(
      bus,
      { runId: envelope.runId, agentId: envelope.agentId, callId },
      reading.signal,
    );
    if (!pending || asked.has(pending.requestId)) return;
    asked.add(pending.requestId);
    status(
      `troupe: the run waits for approval of ${visibleLine(name)} (call ${visibleLine(callId)}): troupe approve ${visibleLine(callId)} --run ${visibleLine(envelope.runId)} --allow (or --deny) answers it, as troupe approvals, the web console and troupe observe do`,
    );
  };
  const onRequested = (envelope: AgentEvent<"approval.requested">) =>
    void (asker ? answerHere(envelope) : tellWaiting(envelope)).catch((error) =>
      log.warn({ err: error }, "could not answer here"),
    );
  const earlier = new Map<string, AgentEvent<"approval.requested">>();
  let told = false;
  // A daemon that restarted without the run: said, and the run no longer waited for.
  const unknown = endIfUnknown(bus, config, turn.runId, reading);
  const contact = watchDaemon(bus, {
    lost: (ms) => {
      if (told) return;
      told = true;
      status(`troupe: lost contact with the daemon (last seen ${Math.round(ms / 1000)} s ago); waiting…`);
    },
    back: () => {
      told = false;
      status("troupe: the daemon is back");
    },
    started: unknown.started,
  });
  let output: AgentOutput | undefined;
  try {
    for (let next = await turn.first; !next.done; next = await events.next()) {
      const envelope = next.value;
      turn.seen?.(envelope);
      if (!isNew(envelope)) {
        // Asked before this turn and still waiting (a resumed run's): asked here too, once the
        // run's past has been read past it; one decided or closed in it is not.
        if (isEvent(envelope, "approval.requested")) {
          const key = `${envelope.agentId}.${envelope.data.callId}`;
          earlier.set(key, envelope);
          setTimeout(() => earlier.get(key) === envelope && onRequested(envelope), PAST_READ_MS).unref();
        } else if (isEvent(envelope, "approval.decided") || isEvent(envelope, "approval.closed"))
          earlier.delete(`${envelope.agentId}.${envelope.data.callId}`);
        continue;
      }
      // Decided anywhere, or closed unanswered: the question here is withdrawn before the line that says why.
      if (isEvent(envelope, "approval.decided") || isEvent(envelope, "approval.closed"))
        asker?.cancel(envelope.data.callId);
      renderer.event({ envelope });
      if (isEvent(envelope, "approval.requested")) onRequested(envelope);
      if (isEvent(envelope, "agent.stopped") && envelope.agentId === turn.agentId) {
        output = envelope.data;
        break;
      }
    }
  } catch (error) {
    throw unknown.error() ?? error;
  } finally {
    contact.stop();
  }
  const lost = unknown.error();
  if (lost) throw lost;
  return output;
}
