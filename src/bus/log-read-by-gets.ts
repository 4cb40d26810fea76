import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { BusClosedError, type LoggedEvent, type ReadOptions } from "./bus.js";
import { EventFilter } from "./event-filter.js";
import { type HeardEvent, HeardLive, SETTLE_MS } from "./heard-live.js";
import { GIVE_UP_MS } from "./log-read-state.js";
import { type LogReaderParts, readLog } from "./nats-log-reader.js";
import { StreamGets } from "./stream-gets.js";

/**
 * A follower at the log's end that cannot yet take what it hears looks again this often; one that
 * takes it asks where the log ends this often.
 */
const POLL_MS = 1000;

/**
 * The event log as `readLog` reads it, through a consumer of its own; for a person's role or a
 * worker's (`parts.byGets`), message by message with the stream's gets. Neither may make a consumer
 * (a consumer's deliver subject is the requester's to choose, and the server sends there what it
 * stores: permissions.ts, `readByGets`, `accountsBlock`), so they read the way a get's answer only
 * ever comes back to the asker. Slower (a request an event), but the same events.
 */
export function readLogOrDirect(
  parts: LogReaderParts,
  options: ReadOptions = {},
): AsyncIterable<LoggedEvent> {
  return parts.byGets ? readByGets(parts, options) : readLog(parts, options);
}

/**
 * The run's events by gets: each the next stored on its subjects after the last one read. A
 * follower that has reached the log's end takes what its subscription hears (HeardLive: the same
 * bytes, as they are published) rather than asking the server for each: a get costs the server a
 * JetStream API request, and a reader asking one per event slowed the appends of the runs it
 * watched. The log is read again from where the reader last knew it complete when the subscription
 * cannot vouch for what it heard (the connection lost, more held than the reader took) or an event
 * heard does not follow its agent's last (`EventFilter.follows`).
 */
async function* readByGets(parts: LogReaderParts, options: ReadOptions): AsyncGenerator<LoggedEvent> {
  const { jsm, subjects, intake, logger, connection, inboxPrefix } = parts;
  const stream = subjects.eventStream;
  const filter = new EventFilter(options.from !== "now");
  const wanted = subjects.events(options.runId);
  const live = options.follow ? new HeardLive(connection, wanted, intake, logger) : undefined;
  const gets = new StreamGets(connection, jsm.getOptions().apiPrefix ?? "$JS.API", stream, inboxPrefix);
  try {
    // As a consumer's read: one that cannot open fails at once (its caller says so and tries again),
    // one under way rides out the server away (`riding`).
    let opened = false;
    const ask = async <T>(request: () => Promise<T>): Promise<T> => {
      const answer = opened ? await riding(request, options.signal) : await request();
      opened = true;
      return answer;
    };
    const lastSeq = async () =>
      (await ask(() => jsm.streams.info(stream).catch(noStream)))?.state.last_seq ?? 0;
    // No stream yet (no daemon has made it) holds no event yet: a follower looks again.
    let seq = options.from === "now" ? (await lastSeq()) + 1 : 1;
    // Gets are asked `window` at a time, one a sequence number from `seq` on, each for the next
    // stored message of the wanted subjects at or after it: every wanted message in the window is
    // one get's own answer, so none is missed, and a log read from its start (every message wanted)
    // takes one round trip per window rather than per event. The window doubles while its answers
    // are new messages and shrinks to what they were when most are the same one (a run's events
    // spread thin among others'), down to one get at the log's end; a reader there asks at least
    // as many as the live events it heard meanwhile.
    let window = 1;
    let heardBefore = 0;
    // Taking what the subscription hears: since `losses` was this, nothing heard was let go.
    let following: { losses: number; syncedAt: number; trust: boolean } | undefined;
    while (!options.signal?.aborted) {
      if (live && following) {
        // Once a second, where the log ends: when what was heard until then is taken, nothing
        // stored up to there is left unread, and a read of the log again starts after it.
        let complete: number | undefined;
        if (Date.now() - following.syncedAt >= POLL_MS) {
          const last = await lastSeq();
          await ask(() => connection.flush());
          following.syncedAt = Date.now();
          complete = last + 1;
        }
        const heard = live.take();
        if (live.losses !== following.losses || live.deaf) {
          live.putBack(heard);
          following = undefined;
          continue;
        }
        if (heard.length === 0) {
          if (complete !== undefined) seq = complete;
          await live.wait(POLL_MS, options.signal);
          continue;
        }
        const { events, rest } = followingEvents(heard, filter, options.runId, following.trust);
        following.trust = false;
        if (rest.length > 0) {
          // An event that does not follow its agent's last: the log from `seq` again, then what
          // was heard is taken as it is (the log had nothing more before it).
          live.putBack(rest);
          following = undefined;
        } else if (complete !== undefined) seq = complete;
        yield* events;
        continue;
      }
      const from = seq;
      const askedAt = Date.now();
      const heard = live?.heard ?? 0;
      window = Math.min(Math.max(window, heard - heardBefore), MAX_WINDOW);
      heardBefore = heard;
      const answers = await ask(() => gets.window(from, window, wanted));
      const read = inWindow(answers, from);
      seq = read.next;
      window = read.found * 2 > window ? Math.min(window * 2, MAX_WINDOW) : Math.max(1, read.found);
      if (read.messages.length === 0) {
        if (!live) return;
        // Nothing stored after `from` when it was asked, and nothing heard let go in the moment
        // before: whatever is stored after is what the subscription heard since, or hears next.
        // A subscription the server refused hears nothing: such a reader looks again each second.
        if (!live.deaf && askedAt >= live.lostAt + SETTLE_MS) {
          following = { losses: live.losses, syncedAt: askedAt, trust: true };
          window = 1;
          continue;
        }
        // Anything heard since the get was asked is looked for at once; else at the next heard.
        if (live.heard === heard) await live.wait(POLL_MS, options.signal);
        continue;
      }
      const events: LoggedEvent[] = [];
      for (const msg of read.messages) {
        // A stored message that was a stream's answer (a direct get's reply sent onto an event subject).
        if (msg.streamAnswer) {
          logger.warn({ subject: msg.subject }, "skipped a stored message sent here");
          continue;
        }
        intake.decodeEach(msg.data, msg.subject, (envelope, json) => {
          if (options.runId !== undefined && envelope.runId !== options.runId) return;
          if (!filter.accept(envelope)) return;
          events.push(
            json === undefined
              ? { seq: msg.seq, subject: msg.subject, envelope }
              : { seq: msg.seq, subject: msg.subject, envelope, json },
          );
        });
      }
      yield* events;
    }
  } finally {
    live?.close();
    gets.close();
  }
}

/**
 * What a follower takes of the events it heard: in order, each its filter lets through, up to the
 * first that does not follow its agent's last (the rest is returned, to be taken after the log is
 * read again). `trust`: the log was just read to its end, so an event that does not follow has
 * nothing before it to be found: it is taken.
 */
function followingEvents(
  heard: HeardEvent[],
  filter: EventFilter,
  runId: string | undefined,
  trust: boolean,
): { events: LoggedEvent[]; rest: HeardEvent[] } {
  const events: LoggedEvent[] = [];
  for (let i = 0; i < heard.length; i++) {
    const { subject, envelope, json } = heard[i] as HeardEvent;
    if (runId !== undefined && envelope.runId !== runId) continue;
    if (!trust && !filter.follows(envelope)) return { events, rest: heard.slice(i) };
    if (!filter.accept(envelope)) continue;
    events.push(json === undefined ? { subject, envelope } : { subject, envelope, json });
  }
  return { events, rest: [] };
}

/** At most this many gets in flight at once. */
const MAX_WINDOW = 256;

/**
 * The messages a window of gets read, in order, and the sequence number to ask from next. The gets
 * were asked from `from`, the i-th for the first wanted message at or after `from + i`. An answer of
 * none at `from + i` says nothing was stored there when it was asked, though a message may have been
 * stored since: what comes at or after it is asked again in the next window, and only what the gets
 * before it found is kept. Otherwise the last answer is the first wanted message at or after the
 * window's end, and the next window starts after it.
 */
export function inWindow<T extends { seq: number }>(
  answers: readonly (T | null)[],
  from: number,
): { messages: T[]; next: number; found: number } {
  const empty = answers.indexOf(null);
  const end = empty === -1 ? Number.POSITIVE_INFINITY : from + empty;
  const messages: T[] = [];
  let last = from - 1;
  for (const msg of answers) {
    if (msg === null) break;
    if (msg.seq > last && msg.seq < end) {
      messages.push(msg);
      last = msg.seq;
    }
  }
  return { messages, next: empty === -1 ? last + 1 : end, found: messages.length };
}

function noStream(error: unknown): null {
  if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound) return null;
  throw error;
}

/**
 * A request made again while the server is away or between leaders (a node of a cluster lost, the
 * connection coming back), as a consumer would be made again: the read fails when it has failed for
 * GIVE_UP_MS in a row, or at once for what asking again would not mend (a refusal, a closed bus).
 */
async function riding<T>(request: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  const since = Date.now();
  for (let delay = 100; ; delay = Math.min(delay * 2, 2000)) {
    try {
      return await request();
    } catch (error) {
      if (signal?.aborted || !passing(error) || Date.now() - since > GIVE_UP_MS) throw error;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

function passing(error: unknown): boolean {
  if (error instanceof BusClosedError) return false;
  const text = `${(error as Error)?.name} ${(error as Error)?.message} ${String((error as Error)?.cause ?? "")}`;
  return (
    /timeout|timed out|disconnect|connection|no responders|503|temporarily unavailable|leader/i.test(text) &&
    !/Permission|closed/i.test(text)
  );
}
