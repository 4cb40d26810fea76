import type { Delivery } from "./jetstream-ack.js";

/*
 * The decisions of one read of the event log through an ordered push consumer, apart from its I/O
 * (nats-log-reader.ts feeds the inputs and does the effects). No NATS, no timers, no clock: the time
 * comes with each input that needs it. The read changes in place and each input returns what to do
 * now; the inputs every event brings (a delivery, the reader taking it) allocate nothing.
 *
 *   phase      input                          next       effects
 *   opening    opened, N pending              reading    watch; or end when not following and N = 0
 *   resetting  opened (a reset began first)   resetting  the same
 *   opening    open failed                    opening    drop, abandon (the first next() rejects)
 *   resetting  made                           reading    (the failures so far forgotten)
 *   resetting  make failed                    lost       drop; and fail when failing for over GIVE_UP_MS
 *   any open   delivered, in sequence         same       push; and end when not following and none pending
 *   any open   delivered, out of sequence     resetting  drop, make from the message after the last read
 *   any open   flow control                   same       respond; or hold it at a backlog of HIGH_WATER
 *   any open   taken, backlog < HIGH_WATER/4  same       respond to the held request
 *   any open   heartbeat                      same       publish to the stalled subject (none held);
 *                                                        reset when it names deliveries that never came
 *   any open   the consumer is gone (409)     resetting  drop, make from the message after the last read
 *   any open   tick, silent over SILENCE_MS   resetting  drop, make from the message after the last read
 *   any open   close                          closed     unwatch, drop
 *   closed     a consumer made or not         closed     drop
 *
 * "Any open" is every phase but `closed`; a reset while `resetting` waits for the one under way. The
 * read is `closed` by the reader's queue when it ends, as end, fail and abandon make it. A
 * flow-control request is held beside the phase, not as one of them: the server may ask while the
 * first consumer is still being made.
 */

/** The server says it is alive this often when it has nothing to deliver. */
export const HEARTBEAT_MS = 1000;
/** Nothing heard for this long (no message, no heartbeat): the consumer is made again. */
export const SILENCE_MS = 2500;
/** Above this many events waiting for the reader, the server is held at its next flow-control check. */
export const HIGH_WATER = 8192;
/** Making the consumer again keeps failing for this long: the read fails. */
export const GIVE_UP_MS = 30_000;

/**
 * Where the read's consumer is.
 * - `opening`: the first consumer is being made; the reader's first `next()` waits for it.
 * - `reading`: a consumer delivers; the silence watch runs (from the first consumer made).
 * - `resetting`: the consumer is being made again, from the message after the last one read.
 * - `lost`: making it again failed, and nothing delivers; the silence watch tries again.
 * - `closed`: the reader's queue ended (read to its end, returned, aborted or failed).
 */
export type LogReadPhase = "opening" | "reading" | "resetting" | "lost" | "closed";

/** One read. `R` is a flow-control request as the I/O side has it (a message to answer). */
export interface LogRead<R> {
  phase: LogReadPhase;
  /** Read on past the last message; otherwise the read ends at the message with none pending after it. */
  readonly follow: boolean;
  /** The flow-control request the server waits on while the reader's backlog is high. */
  held: R | undefined;
  /** The current consumer's last delivery in sequence; 0 when it is made. */
  deliverySeq: number;
  /** The stream sequence to go on from when the consumer is made again; 0 until a message was read. */
  nextStreamSeq: number;
  /** When the current consumer last said anything (a message, a heartbeat), or was made. */
  lastHeard: number;
  /** When making the consumer again began to fail; 0 while it does not. */
  failingSince: number;
}

export type LogReadInput<R> =
  /** The first consumer was made; `pending` messages wait for the read. */
  | { readonly type: "opened"; readonly pending: number }
  /** The first consumer could not be made (NATS away, not allowed). */
  | { readonly type: "open-failed"; readonly error: Error }
  /** The consumer was made again. */
  | { readonly type: "made" }
  /** Making the consumer again failed. */
  | { readonly type: "make-failed"; readonly error: Error }
  /** A message the consumer delivered (as its ack subject tells). */
  | ({ readonly type: "delivered" } & Delivery)
  /** The server asks whether to go on (a status 100 with a reply); `queued`: the reader's backlog. */
  | { readonly type: "flow-control"; readonly request: R; readonly queued: number }
  /**
   * A heartbeat (a status 100 without a reply): `lastConsumer` is the last delivery the server sent
   * (Nats-Last-Consumer); `stalled`, where to answer a flow-control request it never had answered
   * (Nats-Consumer-Stalled).
   */
  | { readonly type: "heartbeat"; readonly lastConsumer: number; readonly stalled: string | undefined }
  /** The consumer is gone (a status 409, as when it was deleted). */
  | { readonly type: "gone"; readonly description: string }
  /** Anything else heard on the consumer's inbox: it is alive. */
  | { readonly type: "heard" }
  /** The reader took an event; `queued` are left. */
  | { readonly type: "taken"; readonly queued: number }
  /** The silence watch, every HEARTBEAT_MS. */
  | { readonly type: "tick" }
  /** The reader's queue ended. */
  | { readonly type: "close" };

export type LogReadEffect<R> =
  /** Make the consumer from stream sequence `from` (0: where the read's `from` option says). */
  | { readonly do: "make"; readonly from: number; readonly why: string }
  /** Drop the consumer: stop listening on its inbox, delete it on the server. */
  | { readonly do: "drop" }
  /** Pass the delivered message's events to the reader. */
  | { readonly do: "push" }
  /** Answer a flow-control request: the server goes on. */
  | { readonly do: "respond"; readonly request: R }
  /** Publish an empty message to `subject` (a stalled consumer's flow-control subject). */
  | { readonly do: "publish"; readonly subject: string }
  /** Start the silence watch: a tick every HEARTBEAT_MS. */
  | { readonly do: "watch" }
  /** Stop the silence watch. */
  | { readonly do: "unwatch" }
  /** End the read once the reader has taken what waits for it. */
  | { readonly do: "end" }
  /** Fail the read once the reader has taken what waits for it. */
  | { readonly do: "fail"; readonly error: Error }
  /** End the read at once, what waits for it dropped: a read refused before it began. */
  | { readonly do: "abandon" };

type Effects<R> = readonly LogReadEffect<R>[];

// The effects that carry nothing, made once: the hot paths return these.
const NONE: Effects<never> = [];
const PUSH: Effects<never> = [{ do: "push" }];
const PUSH_AND_END: Effects<never> = [{ do: "push" }, { do: "end" }];
const DROP: Effects<never> = [{ do: "drop" }];
const WATCH: Effects<never> = [{ do: "watch" }];
const END: Effects<never> = [{ do: "end" }];
const ABANDON: Effects<never> = [{ do: "drop" }, { do: "abandon" }];
const CLOSE: Effects<never> = [{ do: "unwatch" }, { do: "drop" }];

/** A read about to make its first consumer, from where its `from` option says. */
export function openingRead<R>(follow: boolean, now: number): LogRead<R> {
  return {
    phase: "opening",
    follow,
    held: undefined,
    deliverySeq: 0,
    nextStreamSeq: 0,
    lastHeard: now,
    failingSince: 0,
  };
}

/** The read after `input` at time `now` (changed in place), and what to do. */
export function step<R>(read: LogRead<R>, input: LogReadInput<R>, now: number): Effects<R> {
  switch (input.type) {
    case "opened":
      return opened(read, input.pending);
    case "open-failed":
      return openFailed(read);
    case "made":
      return made(read);
    case "make-failed":
      return makeFailed(read, input.error, now);
    case "delivered":
      return delivered(read, input, now);
    case "flow-control":
      return flowControl(read, input.request, input.queued, now);
    case "heartbeat":
      return heartbeat(read, input.lastConsumer, input.stalled, now);
    case "gone":
      if (read.phase === "closed") return NONE;
      read.lastHeard = now;
      return reset(read, `the consumer is gone (${input.description})`, now);
    case "heard":
      if (read.phase !== "closed") read.lastHeard = now;
      return NONE;
    case "taken":
      return taken(read, input.queued);
    case "tick":
      return tick(read, now);
    case "close":
      return close(read);
  }
}

function opened<R>(read: LogRead<R>, pending: number): Effects<R> {
  if (read.phase === "closed") return DROP; // aborted while it was made
  // A reset begun while it was made goes on.
  if (read.phase === "opening") read.phase = "reading";
  return !read.follow && pending === 0 ? END : WATCH;
}

function openFailed<R>(read: LogRead<R>): Effects<R> {
  read.held = undefined;
  return read.phase === "closed" ? DROP : ABANDON;
}

function made<R>(read: LogRead<R>): Effects<R> {
  read.failingSince = 0;
  if (read.phase === "closed") return DROP;
  if (read.phase === "resetting") read.phase = "reading";
  return NONE;
}

function makeFailed<R>(read: LogRead<R>, error: Error, now: number): Effects<R> {
  read.held = undefined;
  if (read.phase === "closed") return DROP;
  read.phase = "lost";
  read.failingSince ||= now;
  // The silence watch tries again a heartbeat from now.
  read.lastHeard = now - SILENCE_MS + HEARTBEAT_MS;
  return now - read.failingSince > GIVE_UP_MS ? [{ do: "drop" }, { do: "fail", error }] : DROP;
}

/** A delivery: pushed when it comes in sequence, else the consumer is made again. Every event comes here. */
export function delivered<R>(read: LogRead<R>, delivery: Delivery, now: number): Effects<R> {
  if (read.phase === "closed") return NONE;
  read.lastHeard = now;
  if (delivery.deliverySeq !== read.deliverySeq + 1) return reset(read, "a delivery out of sequence", now);
  read.deliverySeq = delivery.deliverySeq;
  read.nextStreamSeq = delivery.streamSeq + 1;
  return !read.follow && delivery.pending === 0 ? PUSH_AND_END : PUSH;
}

function flowControl<R>(read: LogRead<R>, request: R, queued: number, now: number): Effects<R> {
  if (read.phase === "closed") return NONE;
  read.lastHeard = now;
  if (queued < HIGH_WATER) return [{ do: "respond", request }];
  read.held = request; // answered when the reader has caught up
  return NONE;
}

function heartbeat<R>(
  read: LogRead<R>,
  lastConsumer: number,
  stalled: string | undefined,
  now: number,
): Effects<R> {
  if (read.phase === "closed") return NONE;
  read.lastHeard = now;
  // Stalled on a flow-control answer that was lost (not one held here): answered again.
  const answer: Effects<R> =
    stalled && read.held === undefined ? [{ do: "publish", subject: stalled }] : NONE;
  if (!(lastConsumer > read.deliverySeq)) return answer;
  return [...answer, ...reset(read, "a heartbeat after deliveries that never came", now)];
}

/** The reader took an event: a held server may go on once the backlog is small again. Every event comes here. */
export function taken<R>(read: LogRead<R>, queued: number): Effects<R> {
  const request = read.held;
  if (request === undefined || queued >= HIGH_WATER / 4) return NONE;
  read.held = undefined;
  return [{ do: "respond", request }];
}

function tick<R>(read: LogRead<R>, now: number): Effects<R> {
  return now - read.lastHeard > SILENCE_MS ? reset(read, "no heartbeat", now) : NONE;
}

function close<R>(read: LogRead<R>): Effects<R> {
  if (read.phase === "closed") return NONE;
  read.phase = "closed";
  read.held = undefined;
  return CLOSE;
}

/** The consumer made again from the message after the last one read, unless that is under way. */
function reset<R>(read: LogRead<R>, why: string, now: number): Effects<R> {
  if (read.phase === "resetting" || read.phase === "closed") return NONE;
  read.phase = "resetting";
  read.held = undefined;
  read.deliverySeq = 0;
  read.lastHeard = now;
  return [{ do: "drop" }, { do: "make", from: read.nextStreamSeq, why }];
}
