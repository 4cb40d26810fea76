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
import { deliveryOf } from "./jetstream-ack.js";
import { GIVE_UP_MS, HEARTBEAT_MS, HIGH_WATER, SILENCE_MS } from "./log-read-state.js";
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
 * its agent to another.
 */
export function readLog(parts: LogReaderParts, options: ReadOptions = {}): AsyncIterable<LoggedEvent> {
  return { [Symbol.asyncIterator]: () => new LogCursor(parts, options) };
}

/**
 * One read: its place in the stream, the consumer delivering from it (made again as needed), and
 * the events the reader has yet to take. The iterator is the queue's own, so an event costs the
 * reader one resolved promise, not an async generator's round of them.
 */
class LogCursor implements AsyncIterator<LoggedEvent> {
  readonly #events: AsyncQueue<LoggedEvent>;
  readonly #filter: EventFilter;
  /** The first consumer being made; its failure (NATS away, not allowed) is the read's first `next()`. */
  #opening: Promise<void> | undefined;
  #inbox = "";
  #name = "";
  /** `<stream>.<consumer>.`, as the ack subjects of this consumer's deliveries name them. */
  #owner = "";
  #subscription: ReturnType<NatsConnection["subscribe"]> | undefined;
  /** The stream sequence to go on from after a reset; 0 until a message was read. */
  #nextStreamSeq = 0;
  #deliverySeq = 0;
  #lastHeard = Date.now();
  #heldFlowControl: Msg | undefined;
  #watch: NodeJS.Timeout | undefined;
  #resetting = false;
  #failingSince = 0;
  #closed = false;

  constructor(
    private readonly parts: LogReaderParts,
    private readonly options: ReadOptions,
  ) {
    this.#filter = new EventFilter(options.from !== "now");
    this.#events = new AsyncQueue<LoggedEvent>(
      options.signal,
      () => this.#close(),
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

  async #open(): Promise<void> {
    try {
      const pending = await this.#create();
      if (this.#closed)
        this.#dropConsumer(); // aborted while it was made
      else if (!this.options.follow && pending === 0) this.#events.end();
      else this.#watch = setInterval(() => this.#checkSilence(), HEARTBEAT_MS);
    } catch (error) {
      this.#events.return();
      throw error;
    }
  }

  /** The reader took an event: a held server may go on once the backlog is small again. */
  #taken(): void {
    if (this.#heldFlowControl && this.#events.size < HIGH_WATER / 4) {
      this.#heldFlowControl.respond(Empty);
      this.#heldFlowControl = undefined;
    }
  }

  /** The queue ended (read to its end, returned, aborted or failed): the consumer goes. */
  #close(): void {
    this.#closed = true;
    clearInterval(this.#watch);
    this.#dropConsumer();
  }

  async #create(): Promise<number> {
    const { connection, jsm, subjects, inboxPrefix } = this.parts;
    this.#inbox = createInbox(inboxPrefix);
    this.#name = `log_${nuid.next()}`;
    this.#owner = `${subjects.eventStream}.${this.#name}.`;
    this.#deliverySeq = 0;
    this.#lastHeard = Date.now();
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
      ...this.#startAt(),
    };
    try {
      const info = await jsm.consumers.add(subjects.eventStream, config);
      return info.num_pending;
    } catch (error) {
      this.#dropConsumer();
      throw error;
    }
  }

  #startAt(): Partial<ConsumerConfig> {
    if (this.#nextStreamSeq > 0)
      return { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: this.#nextStreamSeq };
    return { deliver_policy: this.options.from === "now" ? DeliverPolicy.New : DeliverPolicy.All };
  }

  #receive(inbox: string, msg: Msg): void {
    if (inbox !== this.#inbox || this.#closed) return; // a consumer already given up
    this.#lastHeard = Date.now();
    // A delivery names this consumer in its ack subject, whatever it holds: a stored message with no
    // payload (a status reply someone had the server send onto an event subject) is counted as one,
    // and dropped as no envelope. Only what has no ack subject is the server's word to this reader.
    const delivery = deliveryOf(msg.reply, this.#owner);
    if (!delivery) {
      if (msg.data.length === 0 && msg.headers && !msg.reply?.startsWith("$JS.ACK.")) this.#status(msg);
      else this.parts.logger.warn({ subject: msg.subject }, "dropped a message that is not this log read's");
      return;
    }
    if (delivery.deliverySeq !== this.#deliverySeq + 1) {
      this.#reset("a delivery out of sequence");
      return;
    }
    this.#deliverySeq = delivery.deliverySeq;
    this.#nextStreamSeq = delivery.streamSeq + 1;
    const data = msg.data;
    // A direct get's reply that was sent onto an event subject, and stored: not an event.
    if (fromAStream(msg, data.length))
      this.parts.logger.warn({ subject: msg.subject }, "skipped a stored message sent here");
    else
      this.parts.intake.decodeEach(data, msg.subject, (envelope, json) => {
        // Another run's event: a consumer of another's, aimed at this inbox under this one's name.
        if (this.options.runId !== undefined && envelope.runId !== this.options.runId) return;
        if (!this.#filter.accept(envelope)) return;
        this.#events.push(
          json === undefined
            ? { seq: delivery.streamSeq, subject: msg.subject, envelope }
            : { seq: delivery.streamSeq, subject: msg.subject, envelope, json },
        );
      });
    if (!this.options.follow && delivery.pending === 0) this.#events.end();
  }

  /** Flow control, heartbeats, and the consumer gone. */
  #status(msg: Msg): void {
    const headers = msg.headers;
    if (!headers) return;
    if (headers.code === 100 && msg.reply) {
      // Flow control: answered now, or when the reader has caught up.
      if (this.#events.size >= HIGH_WATER) this.#heldFlowControl = msg;
      else msg.respond(Empty);
      return;
    }
    if (headers.code === 100) {
      // Stalled on a flow-control answer that was lost (not one held here): answered again.
      const stalled = headers.get("Nats-Consumer-Stalled");
      if (stalled && !this.#heldFlowControl) this.parts.connection.publish(stalled, Empty);
      const last = Number(headers.get("Nats-Last-Consumer") || 0);
      if (last > this.#deliverySeq) this.#reset("a heartbeat after deliveries that never came");
      return;
    }
    if (headers.code === 409) this.#reset(`the consumer is gone (${headers.description})`);
  }

  #checkSilence(): void {
    if (Date.now() - this.#lastHeard > SILENCE_MS) this.#reset("no heartbeat");
  }

  /** Makes the consumer again from the message after the last one read; retried while it fails. */
  #reset(why: string): void {
    if (this.#resetting || this.#closed) return;
    this.#resetting = true;
    this.parts.logger.debug({ why, from: this.#nextStreamSeq }, "making the log read's consumer again");
    this.#dropConsumer();
    this.#create()
      .then(() => {
        this.#failingSince = 0;
        if (this.#closed) this.#dropConsumer();
      })
      .catch((error: Error) => {
        this.#failingSince ||= Date.now();
        if (Date.now() - this.#failingSince > GIVE_UP_MS) this.#events.fail(error);
        // The silence check tries again.
        this.#lastHeard = Date.now() - SILENCE_MS + HEARTBEAT_MS;
      })
      .finally(() => {
        this.#resetting = false;
      });
  }

  #dropConsumer(): void {
    this.#heldFlowControl = undefined;
    this.#subscription?.unsubscribe();
    this.#subscription = undefined;
    const { connection, jsm, subjects } = this.parts;
    if (this.#name && !connection.isClosed())
      jsm.consumers.delete(subjects.eventStream, this.#name).catch(() => {});
  }
}
