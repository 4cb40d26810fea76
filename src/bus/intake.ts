import { checkEventData } from "../events/agent-events.js";
import {
  decodeEnvelope,
  type Envelope,
  encodeEnvelope,
  MalformedEnvelopeError,
  makeEnvelope,
  parseEnvelope,
} from "../events/envelope.js";
import type { Logger } from "../log.js";
import { SaidAtMost } from "../util/said-at-most.js";
import {
  type BusStats,
  ERROR_REPLY_TYPE,
  type ErrorReplyData,
  type MessageHandler,
  RemoteError,
  RequestRefusedError,
  type Responder,
} from "./bus.js";
import { WORKER_MARK } from "./subjects.js";

const decoder = new TextDecoder();

/** `.<WORKER_MARK>`: how the subject of an event a worker sent ends. */
const MARKED = `.${WORKER_MARK}`;

/** The envelopes this process read that a worker sent: their subject ended in `WORKER_MARK`. */
const sentByWorkers = new WeakSet<Envelope>();

/** Whether a worker sent this event (it came on a subject marked as a worker's). */
export function sentByAWorker(envelope: Envelope): boolean {
  return sentByWorkers.has(envelope);
}

/**
 * What both buses do with bytes that arrive: validate them as envelopes (a malformed one is
 * logged, counted and dropped, never a crash), run handlers so that one that throws cannot take
 * the subscription down, and turn requests into replies.
 *
 * Every event another process wrote passes here (a subscription, a read of the log or of the local
 * store), so this is where an agent event's `data` is checked against its type's schema
 * (src/events/agent-events.ts), once: one that does not fit is dropped like a malformed envelope,
 * with one warning line naming the event and what is wrong; consumers then trust the type. An event
 * of a type this build does not know (a newer build's) is passed on, for consumers to ignore.
 */
export class Intake {
  /** Malformed input is said the first 20 times, then once a second with a count: a flood of it is
   * no flood of the log. */
  readonly #said = new SaidAtMost();

  constructor(
    private readonly stats: BusStats,
    private readonly logger: Logger,
  ) {}

  decode(bytes: Uint8Array, subject: string): Envelope | undefined {
    let envelope: Envelope;
    try {
      envelope = decodeEnvelope(bytes);
    } catch (error) {
      this.#dropped(subject, error);
      return undefined;
    }
    if (!this.#fits(envelope, subject)) return undefined;
    this.stats.delivered++;
    return envelope;
  }

  /** The envelopes of a message that holds one or, as a JSON array, several (an older log's batch). */
  decodeAll(bytes: Uint8Array, subject: string): Envelope[] {
    const envelopes: Envelope[] = [];
    this.decodeEach(bytes, subject, (envelope) => envelopes.push(envelope));
    return envelopes;
  }

  /**
   * Each envelope of a message, as `decodeAll` finds them, handed to `each` with the message's text
   * when it held that envelope alone and as stored (the schema did not have to mend it): a reader
   * that prints events prints that, not the envelope written out again.
   */
  decodeEach(
    bytes: Uint8Array,
    subject: string,
    each: (envelope: Envelope, json: string | undefined) => void,
  ): void {
    let text: string;
    let json: unknown;
    try {
      text = decoder.decode(bytes);
      json = JSON.parse(text);
    } catch (cause) {
      this.#dropped(subject, new MalformedEnvelopeError("envelope is not JSON", { cause }));
      return;
    }
    const single = !Array.isArray(json);
    for (const item of single ? [json] : (json as unknown[])) {
      let envelope: Envelope;
      try {
        envelope = parseEnvelope(item);
        if (notMisplaced(envelope, subject, !single)) sentByWorkers.add(envelope);
      } catch (error) {
        this.#dropped(subject, error);
        continue;
      }
      if (!this.#fits(envelope, subject)) continue;
      this.stats.delivered++;
      each(envelope, single && envelope === item ? text : undefined);
    }
  }

  /** Whether an agent event's `data` fits its type; one that does not is logged, counted and dropped. */
  #fits(envelope: Envelope, subject: string): boolean {
    const why = checkEventData(envelope.type, envelope.data);
    if (why === undefined) return true;
    this.stats.malformed++;
    const more = this.#said.take();
    if (more === undefined) return false;
    const { type, runId, agentId, seq } = envelope;
    this.logger.warn(
      { subject, type, runId, agentId, seq, why, ...(more ? { more } : {}) },
      "dropped an event whose data does not fit its type",
    );
    return false;
  }

  #dropped(subject: string, error: unknown): void {
    this.stats.malformed++;
    const more = this.#said.take();
    if (more === undefined) return;
    this.logger.warn(
      { subject, err: (error as Error).message, ...(more ? { more } : {}) },
      "dropped a malformed envelope",
    );
  }

  deliver(bytes: Uint8Array, subject: string, handler: MessageHandler): void {
    const fail = (error: unknown) => {
      this.stats.handlerErrors++;
      this.logger.error({ subject, err: error }, "a message handler failed");
    };
    this.decodeEach(bytes, subject, (envelope) => {
      try {
        const result = handler(envelope, subject);
        if (result instanceof Promise) result.catch(fail);
      } catch (error) {
        fail(error);
      }
    });
  }

  /**
   * The responder's answer as bytes, an `error` reply when the request was malformed or it threw,
   * or nothing when it left the request to others.
   */
  async answer(bytes: Uint8Array, subject: string, responder: Responder): Promise<Uint8Array | undefined> {
    const request = this.decode(bytes, subject);
    let reply: Envelope | undefined;
    if (!request) {
      reply = errorReply("-", "-", { name: "MalformedEnvelopeError", message: "malformed request envelope" });
    } else {
      try {
        reply = await responder(request, subject);
      } catch (error) {
        // A refusal is the requester's to hear, in one line; anything else is this process's fault.
        if (error instanceof RequestRefusedError)
          this.logger.debug({ subject, why: error.message }, "refused a request");
        else this.logger.warn({ subject, err: error }, "a responder failed");
        const { name, message } = error instanceof Error ? error : { name: "Error", message: String(error) };
        reply = errorReply(request.runId, request.agentId, { name, message });
      }
    }
    return reply && encodeEnvelope(reply);
  }

  /** An `error` reply to the request in `bytes`, for a failure after its answer was made. */
  failure(bytes: Uint8Array, error: unknown): Uint8Array {
    const request = this.decode(bytes, "reply");
    const { name, message } = error instanceof Error ? error : { name: "Error", message: String(error) };
    return encodeEnvelope(errorReply(request?.runId ?? "-", request?.agentId ?? "-", { name, message }));
  }

  /** Reads a reply; an `error` reply becomes a thrown `RemoteError`. */
  reply(bytes: Uint8Array, subject: string): Envelope {
    const answer = decodeEnvelope(bytes);
    if (answer.type === ERROR_REPLY_TYPE) {
      const data = answer.data as Partial<ErrorReplyData>;
      throw new RemoteError(subject, String(data.message ?? "failed"), data.name);
    }
    return answer;
  }
}

function errorReply(runId: string, agentId: string, data: ErrorReplyData): Envelope {
  return makeEnvelope({ runId, agentId, seq: 0, type: ERROR_REPLY_TYPE, data });
}

/**
 * An event is on the subject of its own run, agent and type (`<p>.evt.<runId>.<agentId>.<type>`;
 * an older log's batch of several, of its run and agent): one moved elsewhere (a stored message the server
 * was asked to deliver onto another run's subject) is not that run's. Nor is an API's answer (an
 * `error` or `<verb>.reply`) ever an event: a requester may name an event subject as its reply
 * subject and have the server deliver the answer there, echoing the ids it asked with. True when
 * the subject is marked as a worker's (`WORKER_MARK`).
 */
function notMisplaced(envelope: Envelope, subject: string, batch: boolean): boolean {
  // Read in place, not split: every event a client reads passes here.
  const kind = subject.indexOf(".") + 1;
  if (!subject.startsWith("evt.", kind)) return false;
  const run = kind + 4;
  const agent = run + envelope.runId.length + 1;
  const type = agent + envelope.agentId.length + 1;
  if (
    !subject.startsWith(envelope.runId, run) ||
    subject[agent - 1] !== "." ||
    !subject.startsWith(envelope.agentId, agent) ||
    subject[type - 1] !== "."
  )
    throw new Error(`an event of ${envelope.runId}/${envelope.agentId} on another run's subject`);
  const marked = !batch && subject.endsWith(MARKED);
  const end = marked ? subject.length - MARKED.length : subject.length;
  // An older log's batch held events of several types under one subject.
  if (!batch && (end - type !== envelope.type.length || !subject.startsWith(envelope.type, type)))
    throw new Error(`an event of type ${envelope.type} on the subject of another type`);
  if (envelope.type === ERROR_REPLY_TYPE || envelope.type.endsWith(".reply"))
    throw new Error(`an API's answer (${envelope.type}) on an event subject`);
  return marked;
}
