import type { NatsConnection, Status, Subscription } from "@nats-io/transport-node";
import type { Envelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import type { Intake } from "./intake.js";
import { sentByTheServer } from "./server-sent.js";

/** An event as it was published, decoded: what a follower at the log's end takes. */
export interface HeardEvent {
  subject: string;
  envelope: Envelope;
  /** The message's text, when it held this envelope alone (see `Intake.decodeEach`). */
  json: string | undefined;
}

/** Held for the reader at most this many events, or this many bytes of them; past it they are let go. */
const MAX_HELD = 50_000;
const MAX_HELD_BYTES = 32 * 1024 * 1024;

/**
 * How long after the subscription began, or after events were let go (held too many, the connection
 * lost), a get that finds nothing is believed: a message is delivered to subscribers as it is
 * published and stored a moment later, so one published just before (or heard and let go) may not
 * be stored yet when the get is answered.
 */
export const SETTLE_MS = 1000;

/**
 * The events of a follower's subjects as they are published (the same bytes the stream stores),
 * held until the reader takes them. NATS delivers a subscription's messages in order and loses none
 * while the connection holds; what this cannot vouch for is said by `lostAt`: the connection lost
 * (disconnected, or reconnected), or more held than `MAX_HELD` (a reader slower than the run), at
 * which point what was held is let go. A message the server sent on someone's behalf (a direct get's
 * answer aimed at an event subject, a consumer's delivery) is dropped here as every subscription
 * drops it (server-sent.ts).
 */
export class HeardLive {
  readonly #subscription: Subscription;
  readonly #status: AsyncIterable<Status> & { stop(): void };
  #held: HeardEvent[] = [];
  #heldBytes = 0;
  #heard = 0;
  /** Nothing before it was heard: the subscription began then. */
  #lostAt = Date.now();
  #losses = 0;
  #deaf = false;
  #wake: (() => void) | undefined;

  constructor(
    connection: NatsConnection,
    subject: string,
    intake: Intake,
    private readonly logger: Logger,
  ) {
    this.#subscription = connection.subscribe(subject, {
      callback: (error, msg) => {
        if (error) {
          // Refused (this role may not subscribe to events): the log is all there is to read.
          this.#deaf = true;
          this.#wake?.();
          return;
        }
        this.#heard++;
        if (sentByTheServer(msg)) {
          this.logger.warn({ subject: msg.subject }, "skipped a stored message sent here");
        } else if (this.#held.length >= MAX_HELD || this.#heldBytes >= MAX_HELD_BYTES) {
          this.#lose();
        } else {
          this.#heldBytes += msg.data.length;
          intake.decodeEach(msg.data, msg.subject, (envelope, json) =>
            this.#held.push({ subject: msg.subject, envelope, json }),
          );
        }
        this.#wake?.();
      },
    });
    this.#status = connection.status() as AsyncIterable<Status> & { stop(): void };
    void this.#watch();
  }

  /** Everything held, in the order it was published; nothing is held after. */
  take(): HeardEvent[] {
    const held = this.#held;
    this.#held = [];
    this.#heldBytes = 0;
    return held;
  }

  /**
   * Events taken and not used, held again before anything heard since, because the first does not
   * follow what the reader has: the log is to be read again, and a get that finds nothing believed
   * only `SETTLE_MS` from now, so that what it lacks, if it was published, is stored and read first.
   */
  putBack(events: HeardEvent[]): void {
    if (events.length > 0) this.#held = events.concat(this.#held);
    this.#lostAt = Date.now();
  }

  /**
   * Since when nothing was lost: the subscription's start, the last time the connection was lost,
   * events held were let go, or an event heard did not follow (`putBack`).
   */
  get lostAt(): number {
    return this.#lostAt;
  }

  /** The server refused the subscription: nothing will be heard, and nothing can be vouched for. */
  get deaf(): boolean {
    return this.#deaf;
  }

  /** How many times events were let go: a reader compares it before and after a step. */
  get losses(): number {
    return this.#losses;
  }

  /** How many messages were heard, in all. */
  get heard(): number {
    return this.#heard;
  }

  /** Resolves at the next message heard, after `ms`, or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      this.#wake = done;
      const self = this;
      function done() {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        self.#wake = undefined;
        resolve();
      }
    });
  }

  close(): void {
    this.#subscription.unsubscribe();
    this.#status.stop();
    this.#wake?.();
  }

  #lose(): void {
    this.#held = [];
    this.#heldBytes = 0;
    this.#lostAt = Date.now();
    this.#losses++;
  }

  async #watch(): Promise<void> {
    for await (const status of this.#status)
      if (status.type === "disconnect" || status.type === "reconnect") this.#lose();
  }
}
