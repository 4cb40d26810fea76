import { createInbox, type Msg, type NatsConnection, type Subscription } from "@nats-io/transport-node";

/** A stored message as a get answers it: enough to read it as an event. */
export interface GotMessage {
  seq: number;
  subject: string;
  data: Uint8Array;
  /** Stored with a `Nats-Stream` header: a stream's answer sent onto the subject, not an event. */
  streamAnswer: boolean;
}

/** A get the server refused for a reason other than "no such message" (its own words). */
export class StreamGetError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
    this.name = "StreamGetError";
  }
}

/** The stream's gets take this long at most, a window of them together. */
const WINDOW_TIMEOUT_MS = 10_000;

/** JetStream's error codes for "no message there" and "no such stream": both read as none. */
const NO_MESSAGE = 10037;
const NO_STREAM = 10059;

interface Waiting {
  /** Each get's answer, undefined until it comes. */
  answers: (GotMessage | null | undefined)[];
  left: number;
  resolve: (answers: (GotMessage | null)[]) => void;
  reject: (error: Error) => void;
}

/**
 * A stream's gets (`STREAM.MSG.GET`, each the first message of some subjects at or after a sequence
 * number), asked a window at a time on one subscription of the reader's own inbox. nats.js's request
 * makes and drops an Error for every request answered (a sixth of a reader's time by gets); here a
 * window shares one timer, and each answer is read straight from its JSON. The answer still comes
 * from the JetStream API to the asker's own inbox, as nats.js's get does (log-read-by-gets.ts).
 */
export class StreamGets {
  readonly #connection: NatsConnection;
  readonly #subject: string;
  readonly #inbox: string;
  readonly #subscription: Subscription;
  readonly #windows = new Map<number, Waiting>();
  #nextWindow = 0;
  #refused: Error | undefined;
  readonly #decoder = new TextDecoder();
  readonly #encoder = new TextEncoder();

  constructor(
    connection: NatsConnection,
    apiPrefix: string,
    stream: string,
    inboxPrefix: string | undefined,
  ) {
    this.#connection = connection;
    this.#subject = `${apiPrefix}.STREAM.MSG.GET.${stream}`;
    this.#inbox = createInbox(inboxPrefix);
    this.#subscription = connection.subscribe(`${this.#inbox}.*.*`, {
      callback: (error, msg) => {
        if (!error) return void this.#answer(msg);
        // Refused its inbox (another role's credentials): every window fails with the server's words.
        for (const waiting of [...this.#windows.values()]) waiting.reject(error);
        this.#refused = error;
      },
    });
  }

  /**
   * The answers of `count` gets, the i-th the first message of `wanted` at or after `from + i`, or
   * null where there is none (or no stream yet). Fails when any get fails, or the window takes
   * longer than WINDOW_TIMEOUT_MS.
   */
  window(from: number, count: number, wanted: string): Promise<(GotMessage | null)[]> {
    const id = this.#nextWindow++;
    if (this.#refused) return Promise.reject(this.#refused);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#windows.delete(id);
        reject(new StreamGetError(`a get of the event log timed out after ${WINDOW_TIMEOUT_MS} ms`, 408));
      }, WINDOW_TIMEOUT_MS);
      const done = () => {
        clearTimeout(timer);
        this.#windows.delete(id);
      };
      this.#windows.set(id, {
        answers: new Array(count).fill(undefined),
        left: count,
        resolve: (answers) => {
          done();
          resolve(answers);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      const filter = JSON.stringify(wanted);
      try {
        for (let i = 0; i < count; i++)
          this.#connection.publish(
            this.#subject,
            this.#encoder.encode(`{"seq":${from + i},"next_by_subj":${filter}}`),
            { reply: `${this.#inbox}.${id}.${i}` },
          );
      } catch (error) {
        this.#windows.get(id)?.reject(error as Error);
      }
    });
  }

  close(): void {
    this.#subscription.unsubscribe();
    for (const waiting of this.#windows.values())
      waiting.reject(new StreamGetError("the reader stopped", 499));
  }

  #answer(msg: Msg): void {
    const tokens = msg.subject.slice(this.#inbox.length + 1).split(".");
    const waiting = this.#windows.get(Number(tokens[0]));
    const index = Number(tokens[1]);
    if (!waiting || !(index >= 0 && index < waiting.answers.length) || waiting.answers[index] !== undefined)
      return;
    if (msg.data.length === 0 && msg.headers?.code === 503)
      return void waiting.reject(new StreamGetError("no responders for the event log's gets", 503));
    let answer: GetAnswer;
    try {
      answer = JSON.parse(this.#decoder.decode(msg.data)) as GetAnswer;
    } catch {
      return void waiting.reject(new StreamGetError("a get's answer was not JSON", 500));
    }
    waiting.answers[index] = null;
    if (answer.error) {
      const { code, err_code: errCode, description } = answer.error;
      if (errCode !== NO_MESSAGE && errCode !== NO_STREAM)
        return void waiting.reject(new StreamGetError(description ?? `get failed (${code})`, code ?? 500));
    } else if (answer.message) {
      const { seq, subject, data, hdrs } = answer.message;
      waiting.answers[index] = {
        seq,
        subject,
        data: data ? Buffer.from(data, "base64") : new Uint8Array(),
        streamAnswer: hdrs !== undefined && Buffer.from(hdrs, "base64").includes("Nats-Stream:"),
      };
    }
    if (--waiting.left === 0) waiting.resolve(waiting.answers as (GotMessage | null)[]);
  }
}

interface GetAnswer {
  message?: { seq: number; subject: string; data?: string; hdrs?: string };
  error?: { code?: number; err_code?: number; description?: string };
}
