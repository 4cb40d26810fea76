import { errors } from "@nats-io/transport-node";
import { type Envelope, encodeEnvelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import {
  type AppendAck,
  BusClosedError,
  BusError,
  type EventLog,
  type LoggedEvent,
  type ReadOptions,
} from "./bus.js";
import { readLogOrDirect } from "./log-read-by-gets.js";
import type { LogReaderParts } from "./nats-log-reader.js";
import type { AckedPublisher } from "./nats-publisher.js";
import type { Subjects } from "./subjects.js";

export class NatsEventLog implements EventLog {
  constructor(
    private readonly bus: { readonly subjects: Subjects },
    private readonly reader: LogReaderParts,
    private readonly publisher: AckedPublisher,
    private readonly appendTimeoutMs: number,
    private readonly logger: Logger,
  ) {}

  readonly #subjectOf = (e: Envelope) => this.bus.subjects.event(e.runId, e.agentId, e.type);

  /**
   * Publishes to JetStream and waits for its acknowledgement. While the server is away the same
   * envelope is retried (same `Nats-Msg-Id`, so it is stored once) until `appendTimeoutMs`.
   */
  append(envelope: Envelope): Promise<AppendAck> {
    const subject = this.#subjectOf(envelope);
    return this.#publish(subject, encodeEnvelope(envelope), envelope.id, envelope.type);
  }

  /**
   * Every event on its own subject, as `append` puts it, so a foreign client filtering by type sees
   * each one: they are sent together (one socket write, see AckedPublisher) and their acks awaited
   * together, so a batch costs one round trip, not one per event. One connection's publishes are
   * stored in the order they were sent. Those that failed (the server went away under them) are
   * sent again one at a time, in order, each with its own `Nats-Msg-Id`, so whatever did land is
   * stored once.
   */
  async appendAll(envelopes: readonly Envelope[]): Promise<AppendAck> {
    const subjects = envelopes.map(this.#subjectOf);
    const sent = await Promise.allSettled(
      envelopes.map((envelope, i) =>
        this.publisher.publish(subjects[i] as string, encodeEnvelope(envelope), {
          msgID: envelope.id,
          stream: this.reader.subjects.eventStream,
          timeoutMs: Math.min(5000, this.appendTimeoutMs),
        }),
      ),
    );
    let ack: AppendAck = { seq: 0, duplicate: true };
    for (const [i, outcome] of sent.entries()) {
      if (outcome.status === "fulfilled") {
        ack = { seq: outcome.value.seq, duplicate: outcome.value.duplicate };
        continue;
      }
      const envelope = envelopes[i] as Envelope;
      refused(outcome.reason, envelope.type);
      ack = await this.#publish(subjects[i] as string, encodeEnvelope(envelope), envelope.id, envelope.type);
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
          stream: this.reader.subjects.eventStream,
          timeoutMs: Math.max(500, Math.min(5000, deadline - Date.now())),
        });
        if (attempt > 1) this.logger.info({ subject, attempt }, "event appended after retrying");
        return { seq: ack.seq, duplicate: ack.duplicate };
      } catch (error) {
        refused(error, what);
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

  read(options: ReadOptions = {}): AsyncIterable<LoggedEvent> {
    return readLogOrDirect(this.reader, options);
  }
}

/** A refusal or a closed bus is an answer, not a fault: retrying does not change it, so it is thrown. */
function refused(error: unknown, what: string): void {
  if (error instanceof BusClosedError) throw error;
  if (error instanceof errors.PermissionViolationError)
    throw new BusError(`not allowed to append ${what} to the event log: ${error.message}`, { cause: error });
}
