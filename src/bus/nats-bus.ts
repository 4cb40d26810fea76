import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
} from "@nats-io/jetstream";
import { errors, type Msg, type NatsConnection } from "@nats-io/transport-node";
import type { Role } from "../config/roles.js";
import { type Envelope, encodeEnvelope } from "../events/envelope.js";
import { type Logger, silentLogger } from "../log.js";
import {
  type Bus,
  BusClosedError,
  BusError,
  type BusStats,
  type EventLog,
  type KvStore,
  type MessageHandler,
  NoRespondersError,
  newStats,
  type RequestOptions,
  RequestTimeoutError,
  type Responder,
  type SubscribeOptions,
  type Subscription,
} from "./bus.js";
import { Intake } from "./intake.js";
import { BusUnavailableError, connectNats, type NatsConnectOptions } from "./nats-connect.js";
import { NatsEventLog } from "./nats-event-log.js";
import { blindNatsKv, openNatsKv } from "./nats-kv.js";
import { AckedPublisher } from "./nats-publisher.js";
import { ensureEventStream, type StorageSettings } from "./nats-streams.js";
import { hostsApiPrefix } from "./permissions.js";
import { RequestGate } from "./request-gate.js";
import { sentByTheServer } from "./server-sent.js";
import { DEFAULT_PREFIX, type Subjects, subjectMatcher, subjects } from "./subjects.js";

export interface NatsBusOptions extends NatsConnectOptions {
  prefix?: string;
  log?: Logger;
  /** How long `log.append` keeps retrying while the server is away. Default 30000. */
  appendTimeoutMs?: number;
  /**
   * The daemon's: the event stream and the buckets are made, and changed when they exist, as
   * troupe.yaml's `nats.stream` and `nats.kv` say (nats-streams.ts). Without it they are only made.
   */
  storage?: StorageSettings;
  /**
   * Whose credentials these are. A person's role (client, approver, observer) writes answers
   * blind: never opening their bucket, which its account may not see (permissions.ts).
   */
  role?: Role;
}

/** The bus on a real NATS server: core subjects, JetStream for the event log, KV for state. */
export class NatsBus implements Bus {
  readonly stats: BusStats = newStats();
  readonly eventLog: EventLog;
  readonly intake: Intake;
  #closed = false;
  #buckets = new Map<string, Promise<KvStore>>();
  readonly #publisher: AckedPublisher;

  private constructor(
    readonly subjects: Subjects,
    readonly connection: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly logger: Logger,
    private readonly appendTimeoutMs: number,
    inboxPrefix: string | undefined,
    private readonly storage: StorageSettings | undefined,
    private readonly role: Role | undefined,
  ) {
    this.intake = new Intake(this.stats, logger);
    this.#publisher = new AckedPublisher(connection, inboxPrefix);
    const byGets = BY_GETS.has(role);
    const reader = { connection, jsm, subjects, intake: this.intake, logger, inboxPrefix, byGets };
    this.eventLog = new NatsEventLog(this, reader, this.#publisher, appendTimeoutMs, logger);
  }

  /** Connects, then creates the event stream if it is missing. */
  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    // A worker's events and aborts are marked as its own, as its permissions say (permissions.ts).
    const names = subjects(options.prefix ?? DEFAULT_PREFIX, { worker: options.role === "worker" });
    const logger = (options.log ?? silentLogger).child({ component: "bus", bus: "nats" });
    const nc = await connectNats(options, logger);
    const appendTimeoutMs = options.appendTimeoutMs ?? 30_000;
    // JetStream's first calls (its account, the event stream) are requests: a server that goes away
    // just after the connect fails them (a timeout, a dropped connection), and they are made again
    // as appends are, while the connection comes back; one still starting JetStream (no responders)
    // is waited for a few seconds, a server without JetStream is not.
    const started = Date.now();
    const byGets = BY_GETS.has(options.role);
    let jsm: JetStreamManager | undefined;
    for (let delay = 100; !jsm; delay = Math.min(delay * 2, 1000)) {
      try {
        // A reader by gets only looks: the streams are the daemon's to make (a person's account has no
        // JetStream of its own, only the hosts' streams' info and gets, imported: permissions.ts).
        if (byGets) jsm = await readersJetStream(nc, names, options.storage, logger);
        else {
          const manager = await jetstreamManager(nc);
          await ensureEventStream(manager, names, options.storage, logger);
          jsm = manager;
        }
      } catch (error) {
        const waited = Date.now() - started + delay;
        const away = isTimeout(error) || /disconnect/i.test(String((error as Error)?.message));
        const starting = /no responders|503/i.test(
          `${(error as Error)?.message} ${String((error as Error)?.cause)}`,
        );
        if (nc.isClosed() || !((away && waited < appendTimeoutMs) || (starting && waited < 3000))) {
          await nc.close();
          throw inboxRefused(error, options.inboxPrefix) ?? error;
        }
        logger.debug({ err: (error as Error).message }, "JetStream not reached yet; trying again");
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
    return new NatsBus(
      names,
      nc,
      jsm,
      logger,
      appendTimeoutMs,
      options.inboxPrefix,
      options.storage,
      options.role,
    );
  }

  publish(subject: string, envelope: Envelope): void {
    this.#ensureOpen();
    this.connection.publish(subject, encodeEnvelope(envelope));
    this.stats.published++;
  }

  subscribe(pattern: string, handler: MessageHandler, options: SubscribeOptions = {}): Subscription {
    this.#ensureOpen();
    const matches = subjectMatcher(pattern);
    const sub = this.connection.subscribe(pattern, {
      ...(options.queue === undefined ? {} : { queue: options.queue }),
      callback: (error, msg) => {
        if (error) {
          this.logger.error({ pattern, err: error }, "subscription failed");
          return;
        }
        if (this.#redirected(pattern, matches, msg)) return;
        this.intake.deliver(msg.data, msg.subject, handler);
      },
    });
    return { unsubscribe: () => sub.unsubscribe() };
  }

  async request(subject: string, envelope: Envelope, options: RequestOptions = {}): Promise<Envelope> {
    this.#ensureOpen();
    const timeoutMs = options.timeoutMs ?? 5000;
    let msg: Msg;
    try {
      this.stats.published++;
      msg = await this.connection.request(subject, encodeEnvelope(envelope), { timeout: timeoutMs });
    } catch (error) {
      if (isNoResponders(error)) throw new NoRespondersError(subject, { cause: error });
      if (isTimeout(error)) throw new RequestTimeoutError(subject, timeoutMs, { cause: error });
      throw error;
    }
    return this.intake.reply(msg.data, subject);
  }

  reply(pattern: string, responder: Responder, options: SubscribeOptions = {}): Subscription {
    this.#ensureOpen();
    const gate = options.limit ? new RequestGate(options.limit, this.stats, this.logger) : undefined;
    const matches = subjectMatcher(pattern);
    const sub = this.connection.subscribe(pattern, {
      ...(options.queue === undefined ? {} : { queue: options.queue }),
      callback: (error, msg) => {
        if (error || !msg.reply || this.#redirected(pattern, matches, msg)) return;
        // A reply goes to an inbox, nowhere else: a requester that names a stream's subject (a
        // bucket key) as its reply would have this connection's rights write the answer there.
        // `_R_.` is the server's own reply subject for a request from another account (an import
        // of the API): it leads back to the requester's reply there, in that account.
        if (!msg.reply.startsWith("_INBOX") && !msg.reply.startsWith("_R_.")) {
          this.stats.malformed++;
          this.logger.warn(
            { subject: msg.subject, reply: msg.reply },
            "left a request unanswered: its reply is no inbox",
          );
          return;
        }
        const answer = () =>
          this.intake.answer(msg.data, msg.subject, responder).then((answer) => {
            if (!answer || this.connection.isClosed()) return;
            try {
              msg.respond(answer);
            } catch (failure) {
              // Too big for the server (max_payload): the requester hears why, the responder lives on.
              this.logger.warn(
                { subject: msg.subject, err: (failure as Error).message },
                "could not send a reply",
              );
              msg.respond(this.intake.failure(msg.data, failure));
            }
          });
        if (gate) gate.admit(msg.subject, answer);
        else void answer();
      },
    });
    return { unsubscribe: () => sub.unsubscribe() };
  }

  kv(name: string): Promise<KvStore> {
    this.#ensureOpen();
    const bucket = this.subjects.bucket(name);
    let store = this.#buckets.get(bucket);
    if (!store && name === "answers" && PEOPLE_ROLES.has(this.role)) {
      store = Promise.resolve(blindNatsKv(this.#publisher, bucket));
      this.#buckets.set(bucket, store);
    }
    if (!store) {
      store = openNatsKv(this.connection, this.jsm, this.#publisher, bucket, this.storage, this.logger, {
        byGets: BY_GETS.has(this.role),
      });
      store.catch(() => this.#buckets.delete(bucket));
      this.#buckets.set(bucket, store);
    }
    return store;
  }

  /**
   * Where this connection is and how the event stream is kept, as NATS reports them: the server
   * and its cluster, and the stream's replicas (its leader, and whether each other one is current).
   * Without the stream's info (a role that may not ask for it) only the server is said.
   */
  async clusterInfo(): Promise<ClusterInfo> {
    const server = this.connection.info;
    const here = { server: server?.server_name, cluster: server?.cluster };
    try {
      const info = await this.jsm.streams.info(this.subjects.eventStream);
      return {
        ...here,
        stream: {
          name: info.config.name,
          replicas: info.config.num_replicas,
          leader: info.cluster?.leader,
          followers: (info.cluster?.replicas ?? []).map((peer) => ({
            name: peer.name,
            current: peer.current,
            lag: peer.lag ?? 0,
          })),
        },
      };
    } catch {
      return here;
    }
  }

  async flush(): Promise<void> {
    this.#ensureOpen();
    const deadline = Date.now() + this.appendTimeoutMs;
    let delay = 50;
    for (;;) {
      try {
        await this.connection.flush();
        return;
      } catch (error) {
        if (this.connection.isClosed() || Date.now() + delay > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 1000);
      }
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (!this.connection.isClosed()) {
      // What is queued goes out before the drain, and acks in flight arrive during it.
      this.#publisher.sendQueued();
      try {
        await this.connection.drain();
      } catch (error) {
        this.logger.debug({ err: error }, "drain failed; closing");
        await this.connection.close();
      }
    }
    this.#publisher.close();
  }

  /**
   * A message the server sent here for someone else (server-sent.ts): a push consumer's delivery
   * aimed at this subscription, or a direct get's reply. Nothing Troupe subscribes to is meant to
   * get one, so it is dropped and counted as malformed.
   */
  #redirected(pattern: string, matches: (subject: string) => boolean, msg: Msg): boolean {
    if (matches(msg.subject) && !sentByTheServer(msg)) return false;
    this.stats.malformed++;
    this.logger.warn(
      { pattern, subject: msg.subject },
      "dropped a stored message the server was asked to send here",
    );
    return true;
  }

  #ensureOpen(): void {
    if (this.#closed) throw new BusClosedError();
  }
}

/**
 * JetStream as a reader by gets reaches it: a worker, and a person's role on a server of one account
 * (open, or an operator's own), the streams' own API; with Troupe's two accounts, the people's
 * account has no JetStream (its API answers "not enabled") and reaches the hosts' streams' info and
 * gets under `hostsApiPrefix`.
 */
async function readersJetStream(
  nc: NatsConnection,
  names: Subjects,
  storage: StorageSettings | undefined,
  logger: Logger,
): Promise<JetStreamManager> {
  const own = await jetstreamManager(nc, { checkAPI: false });
  const here = await streamThere(own, names.eventStream);
  // A server of one account that no daemon has used yet: made here, as before, where the role may.
  if (here === "missing") await ensureEventStream(own, names, storage, logger);
  if (here !== "not-enabled") return own;
  const hosts = await jetstreamManager(nc, { checkAPI: false, apiPrefix: hostsApiPrefix(names.prefix) });
  if ((await streamThere(hosts, names.eventStream)) !== "not-enabled") return hosts;
  throw new BusError(`JetStream is not enabled on this server for ${names.prefix}'s streams`);
}

/** What this API says of the stream: there, not made yet, or no JetStream in its account at all. */
async function streamThere(
  jsm: JetStreamManager,
  stream: string,
): Promise<"there" | "missing" | "not-enabled"> {
  try {
    await jsm.streams.info(stream);
    return "there";
  } catch (error) {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
      return "missing";
    if (/not enabled/i.test(`${(error as Error)?.message}`)) return "not-enabled";
    throw error;
  }
}

/**
 * The roles of people: they write answers blind and read by gets, never by a consumer (their
 * account has no JetStream and imports only the hosts' streams' info and gets: permissions.ts).
 */
const PEOPLE_ROLES = new Set<Role | undefined>(["client", "approver", "observer"]);

/**
 * The roles that read by the streams' info and gets only, never a consumer nor a direct get
 * (permissions.ts, `readByGets`): every one but the daemon's.
 */
const BY_GETS = new Set<Role | undefined>([...PEOPLE_ROLES, "worker"]);

function isNoResponders(error: unknown): boolean {
  if (error instanceof errors.NoRespondersError) return true;
  if (error instanceof errors.RequestError) return error.isNoResponders();
  return false;
}

function isTimeout(error: unknown): boolean {
  return (
    error instanceof errors.TimeoutError ||
    (error instanceof Error && error.cause instanceof errors.TimeoutError)
  );
}

/**
 * Replies come to the role's own inbox (`roleInbox`); credentials of another role may not read it,
 * and the first request says so. One line on what to set, instead of every request failing.
 */
function inboxRefused(error: unknown, inboxPrefix: string | undefined): BusUnavailableError | undefined {
  const text = `${(error as Error)?.message} ${String((error as Error)?.cause ?? "")}`;
  if (!inboxPrefix || !/Permissions Violation for Subscription/.test(text) || !text.includes(inboxPrefix))
    return undefined;
  return new BusUnavailableError(
    `these credentials may not receive replies at ${inboxPrefix}: set nats.role in troupe.yaml to the role they are of (troupe credentials ROLE printed them)`,
    { cause: error },
  );
}

/** See `NatsBus.clusterInfo`. */
export interface ClusterInfo {
  /** The server this connection is on (its `server_name`). */
  server: string | undefined;
  cluster: string | undefined;
  stream?: {
    name: string;
    replicas: number;
    leader: string | undefined;
    followers: Array<{ name: string; current: boolean; lag: number }>;
  };
}
