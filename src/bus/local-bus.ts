import { type Envelope, encodeEnvelope } from "../events/envelope.js";
import { type Logger, silentLogger } from "../log.js";
import { AsyncQueue } from "./async-queue.js";
import {
  type AppendAck,
  type Bus,
  BusClosedError,
  type BusStats,
  type EventLog,
  type KvStore,
  type LoggedEvent,
  type MessageHandler,
  NoRespondersError,
  newStats,
  type ReadOptions,
  type RequestOptions,
  RequestTimeoutError,
  type Responder,
  type SubscribeOptions,
  type Subscription,
} from "./bus.js";
import { EventFilter } from "./event-filter.js";
import type { FileStore } from "./file-store.js";
import { Intake } from "./intake.js";
import { LocalKv } from "./local-kv.js";
import { RequestGate } from "./request-gate.js";
import { DEFAULT_PREFIX, type Subjects, subjectMatcher, subjects } from "./subjects.js";

/** JetStream's default duplicate window: a retried append within it is stored once. */
const DUPLICATE_WINDOW_MS = 120_000;

type Deliver = (bytes: Uint8Array, subject: string, replyTo?: (bytes: Uint8Array) => void) => void;

/** The tokens of a pattern before its first wildcard: `a.b.*.c` → `a.b`, `>` → ``. */
function literalHead(pattern: string): string {
  const tokens = pattern.split(".");
  const wild = tokens.findIndex((token) => token === "*" || token === ">");
  return wild === -1 ? pattern : tokens.slice(0, wild).join(".");
}

interface LocalSubscription {
  pattern: string;
  matches: (subject: string) => boolean;
  queue: string | undefined;
  deliver: Deliver;
}

export interface LocalBusOptions {
  prefix?: string;
  log?: Logger;
  /** Keep the event log and KV values on disk (local runs that can be listed, replayed and resumed). */
  store?: FileStore;
}

/**
 * The bus of the embedded single-process mode. Messages are encoded to bytes and decoded per
 * receiver, exactly as on NATS, so no receiver can share or mutate a sender's objects, and delivery
 * is asynchronous and in order per subscriber.
 */
export class LocalBus implements Bus {
  readonly subjects: Subjects;
  readonly stats: BusStats = newStats();
  readonly eventLog: EventLog;
  readonly intake: Intake;
  readonly #logger: Logger;
  /** Subscriptions by the literal head of their pattern (the tokens before its first wildcard). */
  #subs = new Map<string, Set<LocalSubscription>>();
  #queueCursor = new Map<string, number>();
  #buckets = new Map<string, LocalKv>();
  #closed = false;
  readonly #store: FileStore | undefined;

  constructor(options: LocalBusOptions = {}) {
    this.subjects = subjects(options.prefix ?? DEFAULT_PREFIX);
    this.#logger = (options.log ?? silentLogger).child({ component: "bus", bus: "local" });
    this.intake = new Intake(this.stats, this.#logger);
    this.eventLog = new LocalEventLog(this, this.#logger, options.store);
    this.#store = options.store;
  }

  publish(subject: string, envelope: Envelope): void {
    this.publishRaw(subject, encodeEnvelope(envelope));
  }

  /** Publishes bytes as they came from elsewhere; receivers validate them like any message off a wire. */
  publishRaw(subject: string, bytes: Uint8Array): void {
    this.#ensureOpen();
    this.stats.published++;
    this.#route(subject, bytes);
  }

  subscribe(pattern: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscription {
    return this.#addSubscription(pattern, options.queue, (bytes, subject) =>
      this.intake.deliver(bytes, subject, handler),
    );
  }

  async request(subject: string, envelope: Envelope, options: RequestOptions = {}): Promise<Envelope> {
    this.#ensureOpen();
    const timeoutMs = options.timeoutMs ?? 5000;
    const targets = this.#targets(subject);
    if (targets.length === 0) throw new NoRespondersError(subject);
    this.stats.published++;
    const bytes = encodeEnvelope(envelope);
    const reply = await new Promise<Uint8Array>((resolve, reject) => {
      const timer = setTimeout(() => reject(new RequestTimeoutError(subject, timeoutMs)), timeoutMs);
      let answered = false;
      const replyTo = (answer: Uint8Array) => {
        if (answered) return;
        answered = true;
        clearTimeout(timer);
        resolve(answer);
      };
      for (const target of targets) queueMicrotask(() => target.deliver(bytes, subject, replyTo));
    });
    return this.intake.reply(reply, subject);
  }

  reply(pattern: string, responder: Responder, options: SubscribeOptions = {}): Subscription {
    const gate = options.limit ? new RequestGate(options.limit, this.stats, this.#logger) : undefined;
    return this.#addSubscription(pattern, options.queue, (bytes, subject, replyTo) => {
      if (!replyTo) return;
      const answer = () =>
        this.intake.answer(bytes, subject, responder).then((answer) => {
          if (answer) replyTo(answer);
        });
      if (gate) gate.admit(subject, answer);
      else void answer();
    });
  }

  async kv(name: string): Promise<KvStore> {
    this.#ensureOpen();
    const bucket = this.subjects.bucket(name);
    let store = this.#buckets.get(bucket);
    if (!store) {
      store = new LocalKv(bucket, this.#store);
      this.#buckets.set(bucket, store);
    }
    return store;
  }

  async flush(): Promise<void> {
    // Deliveries are queued as microtasks; one macrotask turn runs them all.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    await this.flush();
    this.#closed = true;
    this.#subs.clear();
    for (const store of this.#buckets.values()) store.close();
  }

  /** Routes bytes to subscribers; used by the event log so appends reach live subscribers too. */
  route(subject: string, bytes: Uint8Array): void {
    this.#route(subject, bytes);
  }

  #route(subject: string, bytes: Uint8Array): void {
    for (const target of this.#targets(subject)) queueMicrotask(() => target.deliver(bytes, subject));
  }

  /** Every plain subscriber, plus one member of each queue group (round robin). */
  #targets(subject: string): LocalSubscription[] {
    const targets: LocalSubscription[] = [];
    let groups: Map<string, LocalSubscription[]> | undefined;
    for (const sub of this.#candidates(subject)) {
      if (!sub.matches(subject)) continue;
      if (sub.queue === undefined) {
        targets.push(sub);
        continue;
      }
      groups ??= new Map();
      const members = groups.get(sub.queue);
      if (members) members.push(sub);
      else groups.set(sub.queue, [sub]);
    }
    if (groups) {
      for (const [queue, members] of groups) {
        const cursor = this.#queueCursor.get(queue) ?? 0;
        this.#queueCursor.set(queue, cursor + 1);
        targets.push(members[cursor % members.length] as LocalSubscription);
      }
    }
    return targets;
  }

  /**
   * The subscriptions whose head is a token prefix of `subject` (or all of it): the only ones that can
   * match, found in as many lookups as the subject has tokens, however many agents subscribe.
   */
  *#candidates(subject: string): Iterable<LocalSubscription> {
    const empty = this.#subs.get("");
    if (empty) yield* empty;
    for (let dot = subject.indexOf("."); dot !== -1; dot = subject.indexOf(".", dot + 1)) {
      const group = this.#subs.get(subject.slice(0, dot));
      if (group) yield* group;
    }
    const exact = this.#subs.get(subject);
    if (exact) yield* exact;
  }

  #addSubscription(pattern: string, queue: string | undefined, deliver: Deliver): Subscription {
    this.#ensureOpen();
    const sub: LocalSubscription = { pattern, matches: subjectMatcher(pattern), queue, deliver };
    const head = literalHead(pattern);
    const group = this.#subs.get(head) ?? new Set<LocalSubscription>();
    this.#subs.set(head, group);
    group.add(sub);
    return {
      unsubscribe: () => {
        group.delete(sub);
        if (group.size === 0 && this.#subs.get(head) === group) this.#subs.delete(head);
      },
    };
  }

  #ensureOpen(): void {
    if (this.#closed) throw new BusClosedError();
  }
}

interface StoredEvent {
  seq: number;
  subject: string;
  bytes: Uint8Array;
}

class LocalEventLog implements EventLog {
  #events: StoredEvent[] = [];
  #byRun = new Map<string, StoredEvent[]>();
  #seen = new Map<string, { seq: number; at: number }>();
  #followers = new Set<{ runId: string | undefined; queue: AsyncQueue<StoredEvent> }>();

  #loaded = new Set<string>();

  constructor(
    private readonly bus: LocalBus,
    private readonly logger: Logger,
    private readonly store?: FileStore,
  ) {}

  /** A run this process has not seen yet is loaded from the store, once, before its first use. */
  #load(runId: string): void {
    if (!this.store || this.#loaded.has(runId)) return;
    this.#loaded.add(runId);
    for (const bytes of this.store.eventLines(runId) ?? []) {
      const envelope = this.bus.intake.decode(bytes, "store");
      if (!envelope) continue;
      this.#keep(
        this.bus.subjects.event(envelope.runId, envelope.agentId, envelope.type),
        bytes,
        envelope,
        Date.now(),
      );
    }
  }

  #keep(subject: string, bytes: Uint8Array, envelope: Envelope, now: number): StoredEvent {
    const stored: StoredEvent = { seq: this.#events.length + 1, subject, bytes };
    this.#events.push(stored);
    const run = this.#byRun.get(envelope.runId);
    if (run) run.push(stored);
    else this.#byRun.set(envelope.runId, [stored]);
    this.#seen.set(envelope.id, { seq: stored.seq, at: now });
    return stored;
  }

  async append(envelope: Envelope): Promise<AppendAck> {
    this.#load(envelope.runId);
    const subject = this.bus.subjects.event(envelope.runId, envelope.agentId, envelope.type);
    const now = Date.now();
    const seen = this.#seen.get(envelope.id);
    if (seen && now - seen.at < DUPLICATE_WINDOW_MS) return { seq: seen.seq, duplicate: true };
    this.#forgetOld(now);
    const stored = this.#keep(subject, encodeEnvelope(envelope), envelope, now);
    this.store?.appendEvent(envelope.runId, new TextDecoder().decode(stored.bytes));
    this.bus.stats.published++;
    this.bus.route(subject, stored.bytes);
    for (const follower of this.#followers) {
      if (follower.runId === undefined || follower.runId === envelope.runId) follower.queue.push(stored);
    }
    return { seq: stored.seq, duplicate: false };
  }

  /** Each event on its own subject, one after the other: there is no round trip to save here. */
  async appendAll(envelopes: readonly Envelope[]): Promise<AppendAck> {
    let ack: AppendAck = { seq: 0, duplicate: true };
    for (const envelope of envelopes) ack = await this.append(envelope);
    return ack;
  }

  async *read(options: ReadOptions = {}): AsyncIterable<LoggedEvent> {
    const { runId, from = "start", follow = false, signal } = options;
    if (runId !== undefined) {
      this.bus.subjects.events(runId);
      this.#load(runId);
    }
    const backlog =
      from === "start" ? (runId === undefined ? this.#events : (this.#byRun.get(runId) ?? [])) : [];
    // Registered before the backlog is read, so nothing appended meanwhile is missed.
    const follower = follow ? { runId, queue: new AsyncQueue<StoredEvent>(signal) } : undefined;
    if (follower) this.#followers.add(follower);
    const end = backlog.length;
    let lastSeq = 0;
    const filter = new EventFilter(from === "start");
    try {
      for (let i = 0; i < end; i++) {
        if (signal?.aborted) return;
        const stored = backlog[i] as StoredEvent;
        lastSeq = stored.seq;
        const event = this.#toLogged(stored);
        if (event && filter.accept(event.envelope)) yield event;
      }
      if (!follower) return;
      for await (const stored of follower.queue) {
        if (stored.seq <= lastSeq) continue;
        const event = this.#toLogged(stored);
        if (event && filter.accept(event.envelope)) yield event;
      }
    } finally {
      follower?.queue.end();
      if (follower) this.#followers.delete(follower);
    }
  }

  #toLogged(stored: StoredEvent): LoggedEvent | undefined {
    const envelope = this.bus.intake.decode(stored.bytes, stored.subject);
    return envelope && { seq: stored.seq, subject: stored.subject, envelope };
  }

  #forgetOld(now: number): void {
    if (this.#seen.size < 4096) return;
    for (const [id, entry] of this.#seen) {
      if (now - entry.at < DUPLICATE_WINDOW_MS) break;
      this.#seen.delete(id);
    }
    this.logger.trace({ remembered: this.#seen.size }, "pruned the duplicate window");
  }
}
