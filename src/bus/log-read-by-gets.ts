import { JetStreamApiError, type StoredMsg } from "@nats-io/jetstream";
import type { LoggedEvent, ReadOptions } from "./bus.js";
import { EventFilter } from "./event-filter.js";
import { type LogReaderParts, readLog } from "./nats-log-reader.js";

/** JetStream's "maximum consumers limit reached". */
const CONSUMER_LIMIT = 10026;
/** A read by gets that has reached the log's end and follows it looks again this often. */
const POLL_MS = 250;

/**
 * The event log as `readLog` reads it, through a consumer of its own; when the server makes none
 * (a people's copy holds as many as it takes: a reader's seed can make them all), message by
 * message with the stream's gets, which take nothing from the server that others could use up. Slower
 * (a request an event), and it follows by looking again, but it reads the same events.
 */
export function readLogOrDirect(
  parts: LogReaderParts,
  options: ReadOptions = {},
): AsyncIterable<LoggedEvent> {
  return {
    [Symbol.asyncIterator]: () => {
      const cursor = readLog(parts, options)[Symbol.asyncIterator]();
      let inner = cursor;
      let first = true;
      return {
        // Not async: past the first, an event costs the reader the cursor's promise and no other.
        next: () => {
          if (!first) return inner.next();
          first = false;
          return cursor.next().catch((error: unknown) => {
            if (!(error instanceof JetStreamApiError && error.code === CONSUMER_LIMIT)) throw error;
            parts.logger.warn(
              { stream: parts.subjects.eventStream },
              "the log's copy takes no more consumers: read message by message",
            );
            inner = readByGets(parts, options)[Symbol.asyncIterator]();
            return inner.next();
          });
        },
        return: () => inner.return?.() ?? Promise.resolve({ done: true as const, value: undefined }),
      };
    },
  };
}

/** The run's events by gets: each the next stored on its subjects after the last one read. */
async function* readByGets(parts: LogReaderParts, options: ReadOptions): AsyncGenerator<LoggedEvent> {
  const { jsm, subjects, intake, logger } = parts;
  const stream = subjects.eventStream;
  const filter = new EventFilter(options.from !== "now");
  const wanted = subjects.events(options.runId);
  let seq = options.from === "now" ? (await jsm.streams.info(stream)).state.last_seq + 1 : 1;
  while (!options.signal?.aborted) {
    // A stream's own get (2.9 takes `next_by_subj` there too): a direct get's answer comes from the
    // copy and could be aimed, through the people's import, at the answers bucket.
    const msg: StoredMsg | null = await jsm.streams.getMessage(stream, {
      seq,
      next_by_subj: wanted,
    } as never);
    if (!msg) {
      if (!options.follow) return;
      await pause(POLL_MS, options.signal);
      continue;
    }
    seq = msg.seq + 1;
    // A stored message that was a stream's answer (a direct get's reply sent onto an event subject).
    if (msg.header?.has("Nats-Stream")) {
      logger.warn({ subject: msg.subject }, "skipped a stored message sent here");
      continue;
    }
    const events: LoggedEvent[] = [];
    intake.decodeEach(msg.data, msg.subject, (envelope, json) => {
      if (options.runId !== undefined && envelope.runId !== options.runId) return;
      if (!filter.accept(envelope)) return;
      events.push(
        json === undefined
          ? { seq: msg.seq, subject: msg.subject, envelope }
          : { seq: msg.seq, subject: msg.subject, envelope, json },
      );
    });
    yield* events;
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}
