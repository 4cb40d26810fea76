import type { Bus } from "../bus/bus.js";
import type { AgentEventMap, AgentEventType } from "../events/agent-events.js";
import { type Envelope, makeEnvelope } from "../events/envelope.js";
import type { Logger } from "../log.js";
import type { Redactor } from "../safety/redact.js";

/** Who sees each event as it is published, and when the log took it (the process's telemetry). */
export interface PublishWatch {
  take(envelope: Envelope): void;
  appended(madeAt: number): void;
}

/** Events one append carries at most; more wait for the next. */
const MAX_BATCH = 512;

/** Streamed text is held at most this long, and this many characters, before it leaves as one event. */
export const TEXT_HOLD_MS = 50;
export const TEXT_HOLD_CHARS = 4096;

/** The events whose adjacent payloads are merged: text streamed a token at a time. */
type TextEventType = "model.delta" | "model.reasoning";
const isTextEvent = (type: AgentEventType): type is TextEventType =>
  type === "model.delta" || type === "model.reasoning";

/** Streamed text not yet sent: its seq is taken when it opens, so nothing can overtake it. */
interface HeldText {
  type: TextEventType;
  seq: number;
  text: string;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * Publishes one agent's events to the event log in the order they were made, numbering them without
 * gaps. One append is in flight at a time, so a slow or retried append never lets a later event
 * overtake an earlier one; the events made meanwhile go together in the next append (on NATS, one
 * message), so a streaming agent costs a round trip per batch, not per event. An append starts a
 * microtask after the first event that finds none in flight, so the events of one transition (a
 * state change, the usage, a tool's start) leave together rather than the first alone: the bus
 * writes at the end of the event loop's turn anyway.
 *
 * Adjacent `model.delta` (and `model.reasoning`) events are merged into one before they leave: the
 * first opens a held event with the next seq, later ones of the same type add their text to it, and it
 * is sent after `TEXT_HOLD_MS`, at `TEXT_HOLD_CHARS`, or as soon as any other event is made (or
 * `flushed` is asked), whichever comes first. So a reader sees text within 50 ms, in order, and a
 * thousand agents streaming tokens make a few dozen messages a second each, not one a token.
 */
export class EventPublisher {
  #seq: number;
  #queue: Envelope[] = [];
  /** From the first event that finds no append going until the queue is empty again. */
  #sending = false;
  /** An append is waiting for its microtask to start. */
  #scheduled = false;
  /** Events made, and events whose append has settled. */
  #made = 0;
  #settled = 0;
  #waiters: Array<{ upTo: number; resolve: () => void }> = [];
  /** Another host owns the agent now: nothing more is published from here. */
  #silenced = false;
  #held: HeldText | undefined;
  readonly #epoch: number;
  readonly #watch: PublishWatch | undefined;

  constructor(
    private readonly bus: Bus,
    readonly runId: string,
    readonly agentId: string,
    private readonly parentId: string | undefined,
    private readonly log: Logger,
    private readonly redactor: Redactor | undefined,
    /** `nextSeq`: the seq of its first event; `epoch`: its placement's (see `Envelope.epoch`). */
    start: { nextSeq?: number; epoch?: number; watch?: PublishWatch | undefined } = {},
  ) {
    this.#seq = start.nextSeq ?? 0;
    this.#epoch = start.epoch ?? 0;
    this.#watch = start.watch;
  }

  /** The seq the next event will get. */
  get nextSeq(): number {
    return this.#seq;
  }

  /** Every string in the data is redacted before it leaves the process. `trace`: the envelope's (an `agent.started`'s). */
  emit<T extends AgentEventType>(type: T, data: AgentEventMap[T], trace?: string): void {
    if (this.#silenced) return;
    if (isTextEvent(type)) this.#holdText(type, (data as AgentEventMap[TextEventType]).text);
    else {
      this.#releaseHeld();
      this.#enqueue(this.#seq++, type, data, trace);
    }
  }

  #holdText(type: TextEventType, text: string): void {
    const held = this.#held;
    if (held?.type === type) held.text += text;
    else {
      this.#releaseHeld();
      this.#held = { type, seq: this.#seq++, text, timer: setTimeout(this.#releaseHeld, TEXT_HOLD_MS) };
      this.#held.timer.unref?.();
    }
    if ((this.#held as HeldText).text.length >= TEXT_HOLD_CHARS) this.#releaseHeld();
  }

  /** Sends the held text, if any, as one event. */
  readonly #releaseHeld = (): void => {
    const held = this.#held;
    if (!held) return;
    this.#held = undefined;
    clearTimeout(held.timer);
    this.#enqueue(held.seq, held.type, { text: held.text });
  };

  #enqueue<T extends AgentEventType>(seq: number, type: T, data: AgentEventMap[T], trace?: string): void {
    const envelope = makeEnvelope({
      runId: this.runId,
      agentId: this.agentId,
      parentId: this.parentId,
      seq,
      type,
      epoch: this.#epoch,
      trace,
      data: this.redactor ? this.redactor.redactDeep(data) : data,
    });
    this.#queue.push(envelope);
    this.#watch?.take(envelope);
    this.#made++;
    if (this.#sending) return;
    this.#sending = true;
    this.#scheduled = true;
    queueMicrotask(this.sendNow);
  }

  /**
   * Starts the append that the events made in this stretch of work wait for, now rather than in its
   * microtask. Nothing when none waits: an append in flight takes what was made meanwhile next.
   */
  readonly sendNow = (): void => {
    if (!this.#scheduled) return;
    this.#scheduled = false;
    void this.#send();
  };

  async #send(): Promise<void> {
    while (this.#queue.length > 0) {
      const batch = this.#queue.splice(0, MAX_BATCH);
      try {
        await this.bus.eventLog.appendAll(batch);
        this.#watch?.appended((batch[0] as Envelope).ts);
      } catch (error) {
        const { type, seq } = batch[0] as Envelope;
        this.log.error({ err: error, type, seq, events: batch.length }, "could not publish events");
      }
      this.#settled += batch.length;
      this.#waiters = this.#waiters.filter((waiter) => {
        if (waiter.upTo > this.#settled) return true;
        waiter.resolve();
        return false;
      });
    }
    this.#sending = false;
  }

  /**
   * Another host took the agent over: what waits to be sent is dropped, and nothing made from now on
   * is sent (an append already in flight can't be called back: readers drop it by its epoch).
   */
  silence(): void {
    this.#silenced = true;
    if (this.#held) clearTimeout(this.#held.timer);
    this.#held = undefined;
    this.#queue = [];
    this.#settled = this.#made;
    for (const waiter of this.#waiters.splice(0)) waiter.resolve();
  }

  /** Resolves when every event emitted so far is in the log (or could not be put there, logged). */
  flushed(): Promise<void> {
    this.#releaseHeld();
    if (this.#settled >= this.#made) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ upTo: this.#made, resolve }));
  }
}
