import type { Envelope } from "../events/envelope.js";
import { AsyncQueue } from "./async-queue.js";
import { type Bus, BusClosedError } from "./bus.js";
import { EventFilter } from "./event-filter.js";

export interface FollowOptions {
  signal?: AbortSignal;
  /** With no event for this long, the log is read instead of the subscription. Default 1000 ms. */
  quietMs?: number;
  /** A read of the log failed while NATS was away, and will be made again. */
  onRetry?: (error: Error) => void;
}

/**
 * Every event of a run from its start, as it is made, for a client that subscribes before the run
 * starts (`troupe run`). Events come from a plain subscription while nothing can have been missed;
 * the event log takes over, replayed from the run's start with what was already seen skipped, as
 * soon as something may have been: a gap in an agent's seq (a message lost at a reconnect, or the run
 * started before the subscription), or a quiet spell (a lost last event looks like one). A
 * subscription costs the server nothing to set up; a consumer on the log costs JetStream API calls
 * and work on the server, which a short run would feel. Retried appends reach subscribers twice:
 * an event is yielded once per agent and seq, and none a host sent after it lost its agent to
 * another (see `EventFilter`).
 */
export async function* followRun(
  bus: Bus,
  runId: string,
  options: FollowOptions = {},
): AsyncIterable<Envelope> {
  const { signal, quietMs = 1000 } = options;
  const seqs = new EventFilter();

  const live = new AsyncQueue<Envelope>(signal);
  let lastAt = Date.now();
  const subscription = bus.subscribe(bus.subjects.events(runId), (envelope) => {
    lastAt = Date.now();
    live.push(envelope);
  });
  const quiet = setInterval(() => {
    if (Date.now() - lastAt >= quietMs) live.end();
  }, quietMs / 4);
  try {
    await bus.flush();
    for await (const envelope of live) {
      if (envelope.seq > seqs.next(runId, envelope.agentId)) break;
      if (!seqs.accept(envelope)) continue;
      yield envelope;
    }
  } finally {
    clearInterval(quiet);
    subscription.unsubscribe();
  }
  // From the log for as long as the run lives: a read that fails while NATS is away (its consumer
  // could not be made or was lost) is made again, from the start, what was seen skipped.
  let delay = 250;
  while (!signal?.aborted) {
    try {
      for await (const { envelope } of bus.eventLog.read({
        runId,
        follow: true,
        signal,
      })) {
        delay = 250;
        if (!seqs.accept(envelope)) continue;
        yield envelope;
      }
      return;
    } catch (error) {
      if (signal?.aborted || !isTransient(error)) throw error;
      options.onRetry?.(error as Error);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 2000);
    }
  }
}

/**
 * A fault of the connection (NATS away, a request that timed out), not of the request; or of a
 * cluster between leaders (JetStream "temporarily unavailable" while a node that was lost comes back).
 */
function isTransient(error: unknown): boolean {
  if (error instanceof BusClosedError) return false;
  const text = `${(error as Error)?.name} ${(error as Error)?.message} ${String((error as Error)?.cause ?? "")}`;
  return (
    /timeout|timed out|disconnect|connection|no responders|reconnect|503|temporarily unavailable/i.test(
      text,
    ) && !/Permission/i.test(text)
  );
}
