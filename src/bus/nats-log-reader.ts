import {
  AckPolicy,
  type ConsumerConfig,
  DeliverPolicy,
  type JetStreamManager,
  ReplayPolicy,
} from "@nats-io/jetstream";
import { createInbox, Empty, type Msg, type NatsConnection, nanos, nuid } from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import { AsyncQueue } from "./async-queue.js";
import type { LoggedEvent, ReadOptions } from "./bus.js";
import { EventFilter } from "./event-filter.js";
import type { Intake } from "./intake.js";
import { type Delivery, deliveryOf } from "./jetstream-ack.js";
import {
  delivered,
  HEARTBEAT_MS,
  type LogRead,
  type LogReadEffect,
  type LogReadInput,
  openingRead,
  step,
  taken,
} from "./log-read-state.js";
import { fromAStream } from "./server-sent.js";
import type { Subjects } from "./subjects.js";

/** Consumers that lost their reader go away on their own after this. */
const INACTIVE_MS = 30_000;

export interface LogReaderParts {
  readonly connection: NatsConnection;
  readonly jsm: JetStreamManager;
  readonly subjects: Subjects;
  readonly intake: Intake;
  readonly logger: Logger;
  /** The role's inbox, where the server may deliver to this connection. */
  readonly inboxPrefix: string | undefined;
  /** A person's role: reads by the stream's gets, never a consumer (log-read-by-gets.ts). */
  readonly byGets?: boolean;
}

/**
 * The event log read through an ordered push consumer: the server sends the run's messages as fast
 * as it can (flow control holds it when the reader falls behind), where a pull consumer waits for a
 * request per batch: 100,000 one-event messages read at 80,000–115,000 events/s here, where nats.js's
 * ordered pull consumer read 52,000–56,000/s (docs/performance.md). Like nats.js's ordered consumers
 * it is gap-free: a delivery out of sequence, a deleted consumer or a silence longer than two
 * heartbeats (the server restarted, the connection came back) makes the consumer again from the
 * message after the last one read. Without `follow` it ends at the message the server says has none
 * pending after it. Events pass an `EventFilter`: each agent's seq once, none from a host that lost
 * its agent to another. What to do when is decided in log-read-state.ts; this does it.
 */
export function readLog(parts: LogReaderParts, options: ReadOptions = {}): AsyncIterable<LoggedEvent> {
  return { [Symbol.asyncIterator]: () => new LogCursor(parts, options) };
}

/**
 * One read's I/O: the consumer delivering to it (made again as the read's state says), the events
 * the reader has yet to take, and the silence watch. Each message, take, tick and consumer made goes
 * to the read's state as an input, and its effects are done here, in order. The iterator is the
 * queue's own, so an event costs the reader one resolved promise, not an async generator's round of
 * them.
 */
class LogCursor implements AsyncIterator<LoggedEvent> {
  readonly #read: LogRead<Msg>;
  readonly #events: AsyncQueue<LoggedEvent>;
  readonly #filter: EventFilter;
  /** The first consumer being made; its failure (NATS away, not allowed) is the read's first `next()`. */
  #opening: Promise<void> | undefined;
  #inbox = "";
  #name = "";
  /** `<stream>.<consumer>.`, as the ack subjects of this consumer's deliveries name them. */
  #owner = "";
  #subscription: ReturnType<NatsConnection["subscribe"]> | undefined;
  #watch: NodeJS.Timeout | undefined;

  constructor(
    private readonly parts: LogReaderParts,
    private readonly options: ReadOptions,
  ) {
    this.#filter = new EventFilter(options.from !== "now");
    // Before the queue, which closes the read at once when its signal is already aborted.
    this.#read = openingRead(options.follow === true, Date.now());
    this.#events = new AsyncQueue<LoggedEvent>(
      options.signal,
      () => this.#input({ type: "close" }),
      () => this.#taken(),
    );
    this.#opening = this.#events.ended ? undefined : this.#open();
    this.#opening?.catch(() => {}); // told through next(), not as an unhandled rejection
  }

  next(): Promise<IteratorResult<LoggedEvent>> {
    const opening = this.#opening;
    if (!opening) return this.#events.next();
    return opening.then(() => {
      this.#opening = undefined;
      return this.#events.next();
    });
  }

  return(): Promise<IteratorResult<LoggedEvent>> {
    return this.#events.return();
  }

  /** Makes the first consumer, from where the read's `from` option says. */
  #open(): Promise<void> {
    return this.#create(this.#read.nextStreamSeq).then(
      (pending) => this.#input({ type: "opened", pending }),
      (error: Error) => {
        this.#input({ type: "open-failed", error });
        throw error;
      },
    );
  }

  #input(input: LogReadInput<Msg>): void {
    this.#do(step(this.#read, input, Date.now()));
  }

  /** The reader took an event. Only a held read has anything to do then, and every event comes here. */
  #taken(): void {
    if (this.#read.held !== undefined) this.#do(taken(this.#read, this.#events.size));
  }

  #receive(inbox: string, msg: Msg): void {
    if (inbox !== this.#inbox || this.#read.phase === "closed") return; // a consumer already given up
    const now = Date.now();
    // A delivery names this consumer in its ack subject, whatever it holds: a stored message with no
    // payload (a status reply someone had the server send onto an event subject) is counted as one,
    // and dropped as no envelope. Only what has no ack subject is the server's word to this reader.
    const delivery = deliveryOf(msg.reply, this.#owner);
    if (delivery) this.#do(delivered(this.#read, delivery, now), msg, delivery);
    else if (msg.data.length === 0 && msg.headers && !msg.reply?.startsWith("$JS.ACK."))
      this.#do(step(this.#read, this.#status(msg), now));
    else {
      this.parts.logger.warn({ subject: msg.subject }, "dropped a message that is not this log read's");
      this.#do(step(this.#read, { type: "heard" }, now));
    }
  }

  /** Flow control, heartbeats, and the consumer gone, as the read's inputs. */
  #status(msg: Msg): LogReadInput<Msg> {
    const headers = msg.headers;
    if (headers?.code === 100 && msg.reply)
      return { type: "flow-control", request: msg, queued: this.#events.size };
    if (headers?.code === 100)
      return {
        type: "heartbeat",
        lastConsumer: Number(headers.get("Nats-Last-Consumer") || 0),
        stalled: headers.get("Nats-Consumer-Stalled") || undefined,
      };
    if (headers?.code === 409) return { type: "gone", description: headers.description };
    return { type: "heard" };
  }

  /** Does what the read's state said, in order; `msg` and `delivery`: the delivery it was told of. */
  #do(effects: readonly LogReadEffect<Msg>[], msg?: Msg, delivery?: Delivery): void {
    for (let i = 0; i < effects.length; i++) {
      const effect = effects[i] as LogReadEffect<Msg>;
      switch (effect.do) {
        case "push":
          if (msg && delivery) this.#push(msg, delivery.streamSeq);
          break;
        case "end":
          this.#events.end();
          break;
        case "respond":
          effect.request.respond(Empty);
          break;
        case "publish":
          this.parts.connection.publish(effect.subject, Empty);
          break;
        case "make":
          this.#remake(effect.from, effect.why);
          break;
        case "drop":
          this.#dropConsumer();
          break;
        case "watch":
          this.#watch = setInterval(() => this.#input({ type: "tick" }), HEARTBEAT_MS);
          break;
        case "unwatch":
          clearInterval(this.#watch);
          break;
        case "fail":
          this.#events.fail(effect.error);
          break;
        case "abandon":
          this.#events.return();
          break;
      }
    }
  }

  /** The delivered message's events, to the reader. */
  #push(msg: Msg, streamSeq: number): void {
    const data = msg.data;
    // A direct get's reply that was sent onto an event subject, and stored: not an event.
    if (fromAStream(msg, data.length)) {
      this.parts.logger.warn({ subject: msg.subject }, "skipped a stored message sent here");
      return;
    }
    this.parts.intake.decodeEach(data, msg.subject, (envelope, json) => {
      // Another run's event: a consumer of another's, aimed at this inbox under this one's name.
      if (this.options.runId !== undefined && envelope.runId !== this.options.runId) return;
      if (!this.#filter.accept(envelope)) return;
      this.#events.push(
        json === undefined
          ? { seq: streamSeq, subject: msg.subject, envelope }
          : { seq: streamSeq, subject: msg.subject, envelope, json },
      );
    });
  }

  /** Makes the consumer again; the read's state hears whether it was. */
  #remake(from: number, why: string): void {
    this.parts.logger.debug({ why, from }, "making the log read's consumer again");
    this.#create(from).then(
      () => this.#input({ type: "made" }),
      (error: Error) => this.#input({ type: "make-failed", error }),
    );
  }

  async #create(from: number): Promise<number> {
    const { connection, jsm, subjects, inboxPrefix } = this.parts;
    this.#inbox = createInbox(inboxPrefix);
    this.#name = `log_${nuid.next()}`;
    this.#owner = `${subjects.eventStream}.${this.#name}.`;
    const inbox = this.#inbox;
    this.#subscription = connection.subscribe(inbox, { callback: (_, msg) => this.#receive(inbox, msg) });
    const config: Partial<ConsumerConfig> = {
      name: this.#name,
      deliver_subject: inbox,
      filter_subject: subjects.events(this.options.runId),
      ack_policy: AckPolicy.None,
      replay_policy: ReplayPolicy.Instant,
      flow_control: true,
      idle_heartbeat: nanos(HEARTBEAT_MS),
      inactive_threshold: nanos(INACTIVE_MS),
      mem_storage: true,
      num_replicas: 1,
      ...this.#startAt(from),
    };
    const info = await jsm.consumers.add(subjects.eventStream, config);
    return info.num_pending;
  }

  #startAt(from: number): Partial<ConsumerConfig> {
    if (from > 0) return { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from };
    return { deliver_policy: this.options.from === "now" ? DeliverPolicy.New : DeliverPolicy.All };
  }

  #dropConsumer(): void {
    this.#subscription?.unsubscribe();
    this.#subscription = undefined;
    const { connection, jsm, subjects } = this.parts;
    if (this.#name && !connection.isClosed())
      jsm.consumers.delete(subjects.eventStream, this.#name).catch(() => {});
  }
}
