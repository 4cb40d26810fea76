import { randomBytes } from "node:crypto";
import { JetStreamApiError } from "@nats-io/jetstream";
import {
  createInbox,
  errors,
  headers,
  type Msg,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import { BusClosedError, BusError } from "./bus.js";

/** What JetStream answered a publish with. */
export interface PubAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

export interface PublishOptions {
  /** The stream that stores the subject: an ack of another (sent here at someone's request) is not this publish's. */
  stream?: string;
  /** `Nats-Msg-Id`: a publish retried with the same id within the stream's window is stored once. */
  msgID?: string;
  /** Stored only if the subject's last message has this sequence (a KV compare-and-set). */
  expectedLastSubjectSeq?: number;
  /** Rejects with a `PublishTimeoutError` when no ack came within this. Default 5000. */
  timeoutMs?: number;
}

/** No ack came in time: the message may or may not be stored. */
export class PublishTimeoutError extends BusError {}

interface Pending {
  subject: string;
  stream: string | undefined;
  deadline: number;
  resolve: (ack: PubAck) => void;
  reject: (error: Error) => void;
}

interface Outgoing {
  subject: string;
  payload: Uint8Array;
  options: PublishOptions;
  token: string;
}

/** How often pending publishes are checked for their deadline. */
const SWEEP_MS = 100;

/** Random bytes in a reply token: 96 bits, 16 characters of base64url. */
const TOKEN_BYTES = 12;
/** Tokens' bytes drawn from the system's randomness at a time. */
const TOKENS_PER_DRAW = 256;
let drawn = Buffer.alloc(0);
let drawnAt = 0;

/**
 * A publish's reply token, unguessable: a role that may have the server answer onto any subject (a
 * publish's ack, a stream API's answer, by naming it as the reply) could otherwise send this
 * connection acks of its own for the publishes to come, and a snapshot write would take a revision
 * of its choosing; and a reader of the events sees each one's reply subject. Short, and drawn in
 * bulk: every publish and its ack carry it, and a UUID per publish (36 characters, parsed byte by
 * byte twice) cost the scale bench 0.3 s and 20 KB an agent.
 */
function replyToken(): string {
  if (drawnAt >= drawn.length) {
    drawn = randomBytes(TOKEN_BYTES * TOKENS_PER_DRAW);
    drawnAt = 0;
  }
  drawnAt += TOKEN_BYTES;
  return drawn.toString("base64url", drawnAt - TOKEN_BYTES, drawnAt);
}

/**
 * Acked JetStream publishes on one connection, pipelined. The publishes asked for in one turn of
 * the event loop leave together at its end, in one socket write, and every ack comes back on one
 * inbox subscription. nats.js's `js.publish` is a request per message: a timer, a deferred and, on
 * success, an `Error("cancelled")` with its stack trace, and a write of its own when nothing else
 * is going out in the same microtask. An agent's turn makes several publishes (events, its
 * snapshot, the tool journal) a few microtasks apart; on this path they cost one write.
 */
export class AckedPublisher {
  readonly #inbox: string;
  readonly #subscription: Subscription;
  readonly #pending = new Map<string, Pending>();
  #outbox: Outgoing[] = [];
  #sweeper: NodeJS.Timeout | undefined;
  #closed = false;

  /** `inboxPrefix`: the connection's (its role's), where the acks come back. */
  constructor(
    private readonly nc: NatsConnection,
    inboxPrefix?: string,
  ) {
    this.#inbox = createInbox(inboxPrefix);
    this.#subscription = nc.subscribe(`${this.#inbox}.*`, {
      callback: (error, msg) => {
        if (!error) this.#answer(msg);
      },
    });
    void this.#watchStatus();
  }

  publish(subject: string, payload: Uint8Array, options: PublishOptions = {}): Promise<PubAck> {
    if (this.#closed) return Promise.reject(new BusClosedError());
    const token = replyToken();
    return new Promise<PubAck>((resolve, reject) => {
      this.#pending.set(token, {
        subject,
        stream: options.stream,
        deadline: Date.now() + (options.timeoutMs ?? 5000),
        resolve,
        reject,
      });
      if (this.#outbox.push({ subject, payload, options, token }) === 1)
        setImmediate(() => this.sendQueued());
      this.#sweeper ??= setInterval(() => this.#sweep(), SWEEP_MS).unref();
    });
  }

  /** Rejects what is still waiting for an ack; later publishes are refused. */
  close(): void {
    this.#closed = true;
    if (!this.nc.isClosed() && !this.#subscription.isClosed()) this.#subscription.unsubscribe();
    this.#outbox = [];
    for (const [token, pending] of this.#pending) this.#settle(token, pending, new BusClosedError());
    clearInterval(this.#sweeper);
    this.#sweeper = undefined;
  }

  /** Sends what is queued now rather than at the end of this turn (before the connection drains). */
  sendQueued(): void {
    const outbox = this.#outbox;
    this.#outbox = [];
    for (const { subject, payload, options, token } of outbox) {
      const pending = this.#pending.get(token);
      if (!pending) continue;
      try {
        this.nc.publish(subject, payload, {
          reply: `${this.#inbox}.${token}`,
          ...(options.msgID !== undefined || options.expectedLastSubjectSeq !== undefined
            ? { headers: publishHeaders(options) }
            : {}),
        });
      } catch (error) {
        // A connection closed under us is a closed bus: the callers do not retry that.
        this.#settle(
          token,
          pending,
          error instanceof errors.ClosedConnectionError ? new BusClosedError() : (error as Error),
        );
      }
    }
  }

  #answer(msg: Msg): void {
    const token = msg.subject.slice(this.#inbox.length + 1);
    const pending = this.#pending.get(token);
    if (!pending) return; // timed out already
    if (msg.data.length === 0 && msg.headers?.code === 503) {
      this.#settle(token, pending, new BusError(`no stream takes ${pending.subject} (no responders)`));
      return;
    }
    let ack: { type?: string; stream?: string; seq?: number; duplicate?: boolean; error?: ApiError };
    try {
      ack = msg.json();
    } catch (error) {
      this.#settle(token, pending, new BusError("JetStream's ack is not JSON", { cause: error }));
      return;
    }
    // A stream API's answer (it has a `type`) or another stream's ack was sent here by someone
    // else's request: the real ack is still to come.
    if (
      ack.type !== undefined ||
      (ack.stream !== undefined && pending.stream && ack.stream !== pending.stream)
    )
      return;
    if (ack.error) this.#settle(token, pending, new JetStreamApiError(ack.error));
    else if (!ack.stream || typeof ack.seq !== "number")
      this.#settle(token, pending, new BusError("invalid ack response"));
    else
      this.#settle(token, pending, { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate === true });
  }

  #settle(token: string, pending: Pending, outcome: PubAck | Error): void {
    this.#pending.delete(token);
    if (outcome instanceof Error) pending.reject(outcome);
    else pending.resolve(outcome);
  }

  /** Runs while publishes wait; it stops at the first sweep that finds none (not per ack, a hot path). */
  #sweep(): void {
    if (this.#pending.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
      return;
    }
    const now = Date.now();
    for (const [token, pending] of this.#pending)
      if (pending.deadline <= now)
        this.#settle(token, pending, new PublishTimeoutError(`no ack for a publish to ${pending.subject}`));
  }

  /**
   * The server refuses a publish with an error on the connection, not an answer: it is matched by
   * subject. A reconnect fails every publish still waiting: it or its ack went with the connection
   * lost (a node killed), and waiting out its deadline would hold the caller for seconds; the caller
   * sends it again at once, and its `Nats-Msg-Id` keeps it stored once.
   */
  async #watchStatus(): Promise<void> {
    for await (const status of this.nc.status()) {
      if (this.#closed) return;
      if (status.type === "reconnect") {
        for (const [token, pending] of this.#pending)
          this.#settle(
            token,
            pending,
            new PublishTimeoutError(`the connection was lost under a publish to ${pending.subject}`),
          );
        continue;
      }
      if (status.type !== "error") continue;
      const error = status.error;
      if (!(error instanceof errors.PermissionViolationError) || error.operation !== "publish") continue;
      for (const [token, pending] of this.#pending)
        if (pending.subject === error.subject) this.#settle(token, pending, error);
    }
  }
}

interface ApiError {
  code: number;
  err_code: number;
  description: string;
}

function publishHeaders(options: PublishOptions) {
  const h = headers();
  if (options.msgID !== undefined) h.set("Nats-Msg-Id", options.msgID);
  if (options.expectedLastSubjectSeq !== undefined)
    h.set("Nats-Expected-Last-Subject-Sequence", String(options.expectedLastSubjectSeq));
  return h;
}
