import {
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import { errors, nanos } from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import {
  type AppendAck,
  BusClosedError,
  BusError,
  type EventLog,
  type LoggedEvent,
  type ReadOptions,
} from "./bus.js";
import { type Envelope, encodeEnvelope, encodeEnvelopes } from "./envelope.js";
import type { Intake } from "./intake.js";
import type { AckedPublisher } from "./nats-publisher.js";
import { fromAStream } from "./server-sent.js";
import type { Subjects } from "./subjects.js";

/** JetStream's duplicate window: a publish retried within it with the same `Nats-Msg-Id` is stored once. */
const DUPLICATE_WINDOW_MS = 120_000;

/** The type token of a message holding several events of one agent. */
const BATCH_TYPE = "batch";

/** A batch message stays well under NATS's default 1 MB payload limit. */
const MAX_BATCH_BYTES = 256 * 1024;

/** Creates the event stream if it does not exist; an existing one is left as it is. */
export async function ensureEventStream(jsm: JetStreamManager, names: Subjects): Promise<void> {
  try {
    await jsm.streams.info(names.eventStream);
    return;
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)) throw error;
  }
  try {
    await jsm.streams.add({
      name: names.eventStream,
      subjects: [names.events()],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      duplicate_window: nanos(DUPLICATE_WINDOW_MS),
    });
  } catch (error) {
    // Another process may have created it between our look and our add.
    await jsm.streams.info(names.eventStream).catch(() => {
      throw error;
    });
  }
}

interface BusParts {
  readonly subjects: Subjects;
  readonly intake: Intake;
}

export class NatsEventLog implements EventLog {
  constructor(
    private readonly bus: BusParts,
    private readonly js: JetStreamClient,
    private readonly publisher: AckedPublisher,
    private readonly appendTimeoutMs: number,
    private readonly logger: Logger,
  ) {}

  /**
   * Publishes to JetStream and waits for its acknowledgement. While the server is away the same
   * envelope is retried (same `Nats-Msg-Id`, so it is stored once) until `appendTimeoutMs`.
   */
  append(envelope: Envelope): Promise<AppendAck> {
    const subject = this.bus.subjects.event(envelope.runId, envelope.agentId, envelope.type);
    return this.#publish(subject, encodeEnvelope(envelope), envelope.id, envelope.type);
  }

  /**
   * One message per up to `MAX_BATCH_BYTES` of events, stored one after the other; a message of
   * several is a JSON array of envelopes on `<p>.evt.<runId>.<agentId>.batch`, its `Nats-Msg-Id` the
   * first one's id.
   */
  async appendAll(envelopes: readonly Envelope[]): Promise<AppendAck> {
    const encoded = envelopes.map((envelope) => encodeEnvelope(envelope));
    let ack: AppendAck = { seq: 0, duplicate: true };
    for (let start = 0; start < envelopes.length; ) {
      let end = start + 1;
      let size = (encoded[start] as Uint8Array).length;
      while (end < envelopes.length && size + (encoded[end] as Uint8Array).length + 1 <= MAX_BATCH_BYTES)
        size += (encoded[end++] as Uint8Array).length + 1;
      const first = envelopes[start] as Envelope;
      ack =
        end - start === 1
          ? await this.#publish(
              this.bus.subjects.event(first.runId, first.agentId, first.type),
              encoded[start] as Uint8Array,
              first.id,
              first.type,
            )
          : await this.#publish(
              this.bus.subjects.event(first.runId, first.agentId, BATCH_TYPE),
              encodeEnvelopes(encoded.slice(start, end)),
              first.id,
              `${end - start} events`,
            );
      start = end;
    }
    return ack;
  }

  async #publish(subject: string, bytes: Uint8Array, msgID: string, what: string): Promise<AppendAck> {
    const deadline = Date.now() + this.appendTimeoutMs;
    let delay = 25;
    for (let attempt = 1; ; attempt++) {
      try {
        const ack = await this.publisher.publish(subject, bytes, {
          msgID,
          timeoutMs: Math.max(500, Math.min(5000, deadline - Date.now())),
        });
        if (attempt > 1) this.logger.info({ subject, attempt }, "event appended after retrying");
        return { seq: ack.seq, duplicate: ack.duplicate };
      } catch (error) {
        // A refusal or a closed bus is an answer, not a fault: retrying does not change it.
        if (error instanceof BusClosedError) throw error;
        if (error instanceof errors.PermissionViolationError)
          throw new BusError(`not allowed to append ${what} to the event log: ${error.message}`, {
            cause: error,
          });
        if (Date.now() + delay >= deadline) {
          throw new BusError(`could not append ${what} to the event log within ${this.appendTimeoutMs} ms`, {
            cause: error,
          });
        }
        this.logger.debug({ subject, attempt, err: (error as Error).message }, "append failed; retrying");
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 1000);
      }
    }
  }

  /**
   * An ordered consumer over the run's subjects: gap-free and in order, recreated by the client
   * after a reconnect. Without `follow` it ends where the log ended when the read began.
   */
  async *read(options: ReadOptions = {}): AsyncIterable<LoggedEvent> {
    const { runId, from = "start", follow = false, signal } = options;
    if (signal?.aborted) return;
    const consumer = await this.js.consumers.get(this.bus.subjects.eventStream, {
      filter_subjects: this.bus.subjects.events(runId),
      deliver_policy: from === "start" ? DeliverPolicy.All : DeliverPolicy.New,
    });
    const info = await consumer.info(true);
    if (!follow && info.num_pending === 0) {
      await consumer.delete().catch(() => {});
      return;
    }
    // Short pulls with heartbeats: after a server restart the consumer is found gone and recreated within seconds.
    const messages = await consumer.consume({ max_messages: 512, expires: 5000 });
    const stop = () => messages.stop();
    signal?.addEventListener("abort", stop, { once: true });
    try {
      for await (const msg of messages) {
        // A direct get's reply that was sent onto an event subject, and stored: not an event.
        if (fromAStream(msg))
          this.logger.warn({ subject: msg.subject }, "skipped a stored message sent here");
        else
          for (const envelope of this.bus.intake.decodeAll(msg.data, msg.subject))
            yield { seq: msg.seq, subject: msg.subject, envelope };
        if (!follow && msg.info.pending === 0) break;
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      messages.stop();
    }
  }
}
