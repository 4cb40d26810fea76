import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { VIEWS } from "../config/roles.js";
import type { Logger } from "../log.js";
import { connectNats, type NatsConnectOptions } from "./nats-connect.js";
import {
  bucketWanted,
  EVENT_STREAM_ENTRIES,
  eventStreamWanted,
  type StorageSettings,
} from "./nats-streams.js";
import { mirroredStreams, mirrorSource, roleInbox } from "./permissions.js";
import { subjects } from "./subjects.js";

/** What became of the people's copies: made (or already there), or not, on a server without the accounts. */
export type ViewsOutcome = "kept" | "no-accounts";

/**
 * Makes the people's read-only copies of the event log and of the buckets they read (permissions.ts,
 * `accountsBlock`), or brings their limits to the daemon's settings: mirrors in the people's account
 * of the streams in the hosts' account, under the same names, so a client, an approver or an
 * observer reads them as it would the streams themselves. Connects as the daemon's views identity
 * (`connection.nkeySeedFile`); a server that refuses it has no such accounts (one started by an
 * earlier Troupe, or an operator's own with the one-account config): the roles then read the
 * streams themselves, and nothing is made.
 */
export async function ensureViews(
  connection: NatsConnectOptions,
  prefix: string,
  storage: StorageSettings | undefined,
  log: Logger,
): Promise<ViewsOutcome> {
  const nc = await connectViews(connection, prefix, log);
  if (!nc) return "no-accounts";
  try {
    const jsm = await jetstreamManager(nc);
    for (const wanted of viewConfigs(prefix, storage)) {
      const info = await infoOf(jsm, wanted.name);
      // The stream itself, not a copy: a server with one account, open or configured so.
      if (info && !info.config.mirror) return "no-accounts";
      if (info && info.config.max_consumers !== wanted.max_consumers) {
        // A copy made before it had a bound on consumers (JetStream cannot add one in place): made
        // again, from its stream, without the consumers a reader's seed left on it.
        await jsm.streams.delete(wanted.name);
        await jsm.streams.add(wanted);
        log.info(
          { stream: wanted.name },
          "made the people's copy of a stream again, with a bound on its consumers",
        );
      } else if (!info) {
        await jsm.streams.add(wanted);
        log.info({ stream: wanted.name }, "made the people's read-only copy of a stream");
      } else if (differs(info.config, wanted)) {
        await jsm.streams.update(wanted.name, { ...info.config, ...limitsOf(wanted) });
        log.info({ stream: wanted.name }, "the people's copy of a stream takes the daemon's limits");
      }
      await dropDurables(jsm, wanted.name, log);
    }
    return "kept";
  } finally {
    await nc.close();
  }
}

/** How often the daemon looks whether each of the people's copies is still there. */
export const VIEWS_CHECKED_MS = 2000;

/**
 * Keeps the people's copies while the daemon lives, on one connection as the views identity: a
 * copy that is gone is made again, whole, from its stream, within `everyMs`. The people's account
 * has a JetStream API of its own, and a person's role may name any of its subjects as the reply to
 * a request (a get whose answer is empty, a consumer's heartbeat): the server then sends that answer
 * there as a request no permission of the role's is checked against, and
 * `$JS.API.STREAM.DELETE.<copy>` takes an empty one. Purges and deletes of messages are refused by
 * the copies themselves (`deny_purge`, `deny_delete`); a deleted copy is what this mends. On
 * nats-server 2.9 a copy made again of a bucket stops at the first key its stream holds only by a
 * later revision (the copy is given the revision's expected-last-sequence header and has no earlier
 * one): the event log's copy comes back whole, a bucket's only where every key's revisions are held.
 */
export async function keepViews(
  connection: NatsConnectOptions,
  prefix: string,
  storage: StorageSettings | undefined,
  log: Logger,
  everyMs = VIEWS_CHECKED_MS,
): Promise<{ close(): Promise<void> } | undefined> {
  const nc = await connectViews(connection, prefix, log);
  if (!nc) return undefined;
  const jsm = await jetstreamManager(nc);
  const wanted = viewConfigs(prefix, storage);
  let checking: Promise<void> | undefined;
  const check = async () => {
    for (const view of wanted) {
      if (await infoOf(jsm, view.name)) continue;
      await jsm.streams.add(view);
      log.warn({ stream: view.name }, "made the people's copy of a stream again: it had been deleted");
    }
  };
  const timer = setInterval(() => {
    // NATS away, or the copy made meanwhile by another: the next look tries again.
    checking ??= check()
      .catch((error: Error) => log.debug({ err: error.message }, "could not look at the people's copies"))
      .finally(() => (checking = undefined));
  }, everyMs);
  timer.unref();
  return {
    close: async () => {
      clearInterval(timer);
      await checking;
      await nc.close();
    },
  };
}

/** A connection as the daemon's views identity; none on a server without the people's account. */
async function connectViews(connection: NatsConnectOptions, prefix: string, log: Logger) {
  try {
    return await connectNats(
      { ...connection, name: "troupe-daemon-views", inboxPrefix: roleInbox(prefix, VIEWS) },
      log,
    );
  } catch (error) {
    if (!/authorization violation/i.test(String((error as Error).cause ?? error))) throw error;
    log.warn(
      "this nats-server has no separate account for clients, approvers and observers (started by an earlier Troupe, or configured so): they read the streams themselves",
    );
    return undefined;
  }
}

function infoOf(jsm: JetStreamManager, name: string) {
  return jsm.streams.info(name).catch((error) => {
    if (error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)
      return undefined;
    throw error;
  });
}

type ViewConfig = Partial<StreamConfig> & { name: string };

/** Consumers each people's copy takes at most: readers at once (observers, pages, `troupe run`s). */
export const VIEW_CONSUMERS = 1000;

/** The mirror of each stream the people read, with the limits the daemon gives the stream itself. */
export function viewConfigs(prefix: string, storage: StorageSettings | undefined): ViewConfig[] {
  const s = subjects(prefix);
  const source = mirrorSource(prefix);
  return mirroredStreams(prefix).map((name) => {
    const isEvents = name === s.eventStream;
    const limits = isEvents
      ? { max_msgs: EVENT_STREAM_ENTRIES, ...eventStreamWanted(storage?.stream) }
      : bucketWanted(name.slice(3), storage?.kv);
    return {
      name,
      mirror: { name, external: { api: source.api, deliver: source.deliver(name) } },
      storage: limits.storage ?? StorageType.File,
      retention: RetentionPolicy.Limits,
      // A copy never refuses what its stream took: the oldest goes first.
      discard: DiscardPolicy.Old,
      ...(isEvents ? {} : { max_msgs_per_subject: 1 }),
      allow_direct: true,
      mirror_direct: true,
      // The people's account has a JetStream API of its own, and a person's role may name any
      // subject of it as the reply to a get from a copy: the server then sends the stored message
      // there as a request (a purge, a message delete) that no permission of the role's is checked
      // against. A copy takes no purge and no delete at all; its limits still drop the oldest.
      deny_purge: true,
      deny_delete: true,
      // Each reader of the log makes one for as long as it reads; a reader's seed cannot make more
      // (durable ones outlive it and the server's restarts, and cost the server memory each).
      max_consumers: VIEW_CONSUMERS,
      ...limitsOf(limits),
    };
  });
}

function limitsOf(config: Partial<StreamConfig>): Partial<StreamConfig> {
  const out: Partial<StreamConfig> = {};
  if (config.deny_purge !== undefined) out.deny_purge = config.deny_purge;
  if (config.deny_delete !== undefined) out.deny_delete = config.deny_delete;
  if (config.max_age !== undefined) out.max_age = config.max_age;
  if (config.max_msgs !== undefined) out.max_msgs = config.max_msgs;
  if (config.max_bytes !== undefined) out.max_bytes = config.max_bytes;
  if (config.num_replicas !== undefined) out.num_replicas = config.num_replicas;
  return out;
}

/** A copy whose limits are not the daemon's, or one made before it refused purges and deletes (set in place). */
function differs(have: Partial<StreamConfig>, want: Partial<StreamConfig>): boolean {
  const limits = limitsOf(want);
  return (Object.keys(limits) as Array<keyof StreamConfig>).some((key) => have[key] !== limits[key]);
}

/**
 * Removes the durable consumers on a copy. Troupe's readers make none (each reads through an
 * ordered consumer that goes with it), so each is one a reader's seed left to take up the copy's
 * room or the server's memory, across restarts.
 */
async function dropDurables(jsm: JetStreamManager, stream: string, log: Logger): Promise<void> {
  const durable: string[] = [];
  for await (const consumer of jsm.consumers.list(stream))
    if (consumer.config.durable_name) durable.push(consumer.name);
  for (const name of durable) await jsm.consumers.delete(stream, name).catch(() => {});
  if (durable.length > 0)
    log.warn(
      { stream, consumers: durable.length },
      "removed durable consumers a reader left on the people's copy",
    );
}
