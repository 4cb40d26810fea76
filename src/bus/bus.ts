import { TroupeError } from "../errors.js";
import type { Envelope } from "../events/envelope.js";
import type { Subjects } from "./subjects.js";

/**
 * The one contract both buses keep: NatsBus (a real broker, many processes and hosts) and LocalBus
 * (in-process, the embedded single-process mode). The contract suite in test/integration runs
 * unchanged against both.
 */
export interface Bus {
  readonly subjects: Subjects;
  /** Counters kept since the bus opened. */
  readonly stats: BusStats;
  /** Core publish: at most once, to whoever is subscribed now. */
  publish(subject: string, envelope: Envelope): void;
  /** Wildcards `*` (one token) and `>` (the rest). With `queue`, one member of the group gets each message. */
  subscribe(pattern: string, handler: MessageHandler, options?: SubscribeOptions): Subscription;
  /** Sends a request and waits for one reply; throws `RequestTimeoutError`, `NoRespondersError` or `RemoteError`. */
  request(subject: string, envelope: Envelope, options?: RequestOptions): Promise<Envelope>;
  /** Answers requests on `pattern`. A responder that throws sends an `error` reply; the requester gets `RemoteError`. */
  reply(pattern: string, responder: Responder, options?: SubscribeOptions): Subscription;
  /** The durable, ordered log of every event of every run. */
  readonly eventLog: EventLog;
  /** A KV bucket of this bus's prefix, created if absent. */
  kv(name: string): Promise<KvStore>;
  /** Resolves when everything published so far has left this process (NATS) or been delivered (local). */
  flush(): Promise<void>;
  /** Drains subscriptions and closes. Idempotent. */
  close(): Promise<void>;
}

export interface BusStats {
  published: number;
  delivered: number;
  /** Messages from the wire that were not a valid envelope: logged, counted, dropped. */
  malformed: number;
  /** Handlers that threw: logged, counted; the subscription goes on. */
  handlerErrors: number;
  /** Requests dropped unanswered because their lane of a limited responder was full (`RequestLimit`). */
  dropped: number;
}

export type MessageHandler = (envelope: Envelope, subject: string) => void | Promise<void>;
/** Answers a request; `undefined` sends no answer from here, leaving the request to other responders. */
export type Responder = (
  request: Envelope,
  subject: string,
) => Envelope | undefined | Promise<Envelope | undefined>;

export interface SubscribeOptions {
  /** Queue group: each message goes to one member. */
  queue?: string;
  /** For `reply`: how many requests are answered at once, and how many wait; the rest are dropped. */
  limit?: RequestLimit;
}

/**
 * A responder's bound: at most `inFlight` answered at once and `queued` waiting, in each lane
 * (`lane(subject)`, one lane when absent). Past that a request is dropped unanswered, so a flood
 * costs a check per message, not a handler, and cannot make the process fall behind its connection.
 */
export interface RequestLimit {
  inFlight: number;
  queued: number;
  lane?: (subject: string) => string;
  /**
   * A request that waited this long in its lane's queue is dropped unanswered when its turn comes:
   * its requester gave up by then. Default: kept until answered.
   */
  staleMs?: number;
}

export interface RequestOptions {
  /** Default 5000. */
  timeoutMs?: number;
}

export interface Subscription {
  unsubscribe(): void;
}

export interface AppendAck {
  /** Position in the log (JetStream stream sequence). */
  seq: number;
  /** True when an envelope with this id was already stored: nothing new was written. */
  duplicate: boolean;
}

export interface LoggedEvent {
  /**
   * The message's sequence number in the stream. Absent for an event a follower by gets took as it
   * was published, at the log's end (log-read-by-gets.ts), before any read of the log placed it.
   */
  seq?: number;
  subject: string;
  envelope: Envelope;
  /** The envelope's JSON as it is stored, when the log has it so: what a reader that prints events prints. */
  json?: string;
}

export interface ReadOptions {
  /** One run, or every run when absent. */
  runId?: string;
  /** `start` replays from the first event; `now` sees only what comes after. Default `start`. */
  from?: "start" | "now";
  /** Keep going with live events after the replay. Default false: end at the current end of the log. */
  follow?: boolean;
  signal?: AbortSignal;
}

export interface EventLog {
  /** Appends to the log at `<p>.evt.<runId>.<agentId>.<type>`; subscribers of that subject see it too. */
  append(envelope: Envelope): Promise<AppendAck>;
  /**
   * Appends events of one agent, in order, each on its own subject as `append` would, in as few
   * round trips as the bus can (on NATS, one for all of them). Resolves with the last one's ack.
   * Appending the same events again stores them once.
   */
  appendAll(envelopes: readonly Envelope[]): Promise<AppendAck>;
  /**
   * Events in log order. Invalid envelopes in the log are skipped and counted as malformed; an
   * agent's event of a seq already read, or of an older epoch than one read, is skipped (`EventFilter`).
   */
  read(options?: ReadOptions): AsyncIterable<LoggedEvent>;
}

export interface KvEntry<T = unknown> {
  key: string;
  value: T;
  revision: number;
}

export interface KvChange<T = unknown> {
  key: string;
  /** null when the key was deleted. */
  value: T | null;
  revision: number;
  op: "put" | "delete";
}

export interface KvPutOptions {
  /** Write only if the key is at this revision; 0 means only if it does not exist. */
  expectedRevision?: number;
}

export interface KvWatchOptions {
  /** A key or a pattern with `*` / `>`; all keys when absent. */
  key?: string;
  signal?: AbortSignal;
}

/** Entries of a sweep; `partial` when it stopped at its deadline with more to read. */
export type KvValues<T> = KvEntry<T>[] & { partial?: boolean };

/** JSON values under keys of `[-/_=.A-Za-z0-9]`; revisions only grow. */
export interface KvStore {
  readonly name: string;
  get<T = unknown>(key: string): Promise<KvEntry<T> | null>;
  /** Returns the new revision; throws `KvConflictError` when `expectedRevision` does not hold. */
  put(key: string, value: unknown, options?: KvPutOptions): Promise<number>;
  /** Writes only if the key does not exist; throws `KvConflictError` otherwise. */
  create(key: string, value: unknown): Promise<number>;
  delete(key: string, options?: KvPutOptions): Promise<void>;
  /** The keys there are (matching a pattern with `*` / `>` when given), sorted. */
  keys(pattern?: string): Promise<string[]>;
  /**
   * The current value of each key matching the pattern, read in one sweep (not a get per key).
   * With `withinMs`, what was read by then: `partial` says the sweep was cut short.
   */
  values<T = unknown>(pattern: string, options?: { withinMs?: number }): Promise<KvValues<T>>;
  /**
   * Removes every key matching the pattern, with its history and the markers a delete leaves,
   * so nothing of them stays in the store. Watchers are not told: it is for what nobody watches
   * any more (a finished run's snapshots). Resolves to how many stored entries went.
   */
  forget(pattern: string): Promise<number>;
  /** The current value of each matching key, then every change, until the signal aborts. */
  watch<T = unknown>(options?: KvWatchOptions): AsyncIterable<KvChange<T>>;
}

export class BusError extends TroupeError {
  override name = "BusError";
}

/**
 * A request a responder turns down (malformed, about a run that is not there, beyond what it allows):
 * the requester's mistake, told to the requester, and no fault of the responder's.
 */
export class RequestRefusedError extends BusError {
  override name = "RequestRefusedError";
}

export class RequestTimeoutError extends BusError {
  override name = "RequestTimeoutError";
  constructor(
    readonly subject: string,
    readonly timeoutMs: number,
    options?: ErrorOptions,
  ) {
    super(`no reply on ${subject} within ${timeoutMs} ms`, options);
  }
}

export class NoRespondersError extends BusError {
  override name = "NoRespondersError";
  constructor(
    readonly subject: string,
    options?: ErrorOptions,
  ) {
    super(`nobody answers on ${subject}`, options);
  }
}

/** The responder threw; `message` is what it said. */
export class RemoteError extends BusError {
  override name = "RemoteError";
  constructor(
    readonly subject: string,
    message: string,
    readonly remoteName?: string,
  ) {
    super(`${subject}: ${message}`);
  }
}

export class KvConflictError extends BusError {
  override name = "KvConflictError";
  constructor(
    readonly bucket: string,
    readonly key: string,
    readonly expectedRevision: number,
    options?: ErrorOptions,
  ) {
    super(
      expectedRevision === 0
        ? `${bucket}/${key} already exists`
        : `${bucket}/${key} is no longer at revision ${expectedRevision}`,
      options,
    );
  }
}

export class BusClosedError extends BusError {
  override name = "BusClosedError";
  constructor() {
    super("the bus is closed");
  }
}

const KV_KEY_PATTERN = /^[-/_=.A-Za-z0-9]+$/;

export function assertKvKey(key: string): string {
  if (!KV_KEY_PATTERN.test(key) || key.startsWith(".") || key.endsWith(".")) {
    throw new BusError(
      `KV key "${key}" must be letters, digits and "-/_=." without a leading or trailing "."`,
    );
  }
  return key;
}

/** The reply a responder's failure turns into. */
export const ERROR_REPLY_TYPE = "error";

export interface ErrorReplyData {
  name: string;
  message: string;
}

export function newStats(): BusStats {
  return { published: 0, delivered: 0, malformed: 0, handlerErrors: 0, dropped: 0 };
}
