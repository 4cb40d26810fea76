import type { Bus } from "../bus/bus.js";
import { makeEnvelope } from "../bus/envelope.js";
import type { Logger } from "../log.js";
import type { Redactor } from "../safety/redact.js";
import type { AgentEventMap, AgentEventType } from "./agent-events.js";

/**
 * Publishes one agent's events to the event log in the order they were made, numbering them without
 * gaps. Appends are chained, so a slow append never lets a later event overtake an earlier one.
 */
export class EventPublisher {
  #seq: number;
  #chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly bus: Bus,
    readonly runId: string,
    readonly agentId: string,
    private readonly parentId: string | undefined,
    private readonly log: Logger,
    private readonly redactor: Redactor | undefined,
    nextSeq = 0,
  ) {
    this.#seq = nextSeq;
  }

  /** The seq the next event will get. */
  get nextSeq(): number {
    return this.#seq;
  }

  /** Every string in the data is redacted before it leaves the process. */
  emit<T extends AgentEventType>(type: T, data: AgentEventMap[T]): void {
    const envelope = makeEnvelope({
      runId: this.runId,
      agentId: this.agentId,
      parentId: this.parentId,
      seq: this.#seq++,
      type,
      data: this.redactor ? this.redactor.redactDeep(data) : data,
    });
    this.#chain = this.#chain
      .then(() => this.bus.log.append(envelope).then(() => undefined))
      .catch((error) => {
        this.log.error({ err: error, type, seq: envelope.seq }, "could not publish an event");
      });
  }

  /** Resolves when every event emitted so far is in the log. */
  flushed(): Promise<void> {
    return this.#chain;
  }
}
