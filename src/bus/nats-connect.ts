import { readFileSync } from "node:fs";
import {
  type Authenticator,
  connect,
  credsAuthenticator,
  errors,
  type NatsConnection,
  type NodeConnectionOptions,
  nkeyAuthenticator,
} from "@nats-io/transport-node";
import type { Logger } from "../log.js";
import { BusError } from "./bus.js";

/** How to reach and authenticate to NATS; mirrors `nats:` in troupe.yaml. */
export interface NatsConnectOptions {
  /** One URL, or several separated by commas, tried in that order. */
  url: string;
  /** Shown in the server's connection list. */
  name?: string;
  user?: string;
  password?: string;
  token?: string;
  /** A file holding an nkey seed (`SU…`). */
  nkeySeedFile?: string;
  /** A `.creds` file (JWT + seed). */
  credsFile?: string;
  /** `pinned`: the CA is the embedded server's own, which only that server can show a certificate of. */
  tls?: { caFile?: string; certFile?: string; keyFile?: string; pinned?: boolean };
  /** How long to keep trying the first connection. Default 5000. */
  connectTimeoutMs?: number;
  /** Whose credentials these are, said when the server refuses them (the data dir they came from). */
  credentialsFrom?: string;
  /** Where replies to this connection go (`roleInbox`): only its role may read them. Default `_INBOX`. */
  inboxPrefix?: string;
}

export class BusUnavailableError extends BusError {
  override name = "BusUnavailableError";
}

/** A server that cannot prove it is the one Troupe pins: never retried, never talked to. */
export class ServerNotOursError extends BusUnavailableError {
  override name = "ServerNotOursError";
}

/**
 * Connects with retry for the first connection; afterwards the client reconnects forever, and the
 * connection's status changes are logged. Resolves once connected.
 */
export async function connectNats(options: NatsConnectOptions, log: Logger): Promise<NatsConnection> {
  const deadline = Date.now() + (options.connectTimeoutMs ?? 5000);
  const connectOptions = toNodeOptions(options);
  let delay = 50;
  for (;;) {
    try {
      const nc = await connect(connectOptions);
      watchStatus(nc, log, options.inboxPrefix);
      log.debug({ server: nc.getServer() }, "connected to NATS");
      return nc;
    } catch (error) {
      if (options.tls?.pinned && isTlsRefusal(error))
        throw new ServerNotOursError(
          `the server at ${options.url} is not this data dir's nats-server: it shows no certificate of ${options.tls.caFile} (${describe(error)}); another process may hold the port (ss -ltnp shows which): stop it, then start troupe daemon`,
          { cause: error },
        );
      if (!isRetryable(error) || Date.now() + delay > deadline) {
        const whose = !isRetryable(error) && options.credentialsFrom ? ` (${options.credentialsFrom})` : "";
        throw new BusUnavailableError(
          `cannot connect to NATS at ${options.url}: ${describe(error)}${whose}`,
          {
            cause: error,
          },
        );
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }
}

function toNodeOptions(options: NatsConnectOptions): NodeConnectionOptions {
  const authenticators: Authenticator[] = [];
  if (options.nkeySeedFile) {
    const seed = new TextEncoder().encode(readFileSync(options.nkeySeedFile, "utf8").trim());
    authenticators.push(nkeyAuthenticator(seed));
  }
  if (options.credsFile) authenticators.push(credsAuthenticator(readFileSync(options.credsFile)));
  const result: NodeConnectionOptions = {
    servers: options.url.split(",").map((server) => server.trim()),
    name: options.name ?? "troupe",
    // In the operator's order, not shuffled: each host lists the node it should use first, and the
    // others for when that one is lost (docs/deploy.md).
    noRandomize: true,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 250,
    timeout: 2000,
    ...(options.inboxPrefix ? { inboxPrefix: options.inboxPrefix } : {}),
    // Otherwise every request (each event append is one) builds an Error for its stack trace up
    // front: a sixth of an agent host's CPU when agents stream.
    noAsyncTraces: true,
  };
  if (options.user !== undefined) result.user = options.user;
  if (options.password !== undefined) result.pass = options.password;
  if (options.token !== undefined) result.token = options.token;
  if (authenticators.length > 0) result.authenticator = authenticators;
  if (options.tls) {
    result.tls = {};
    if (options.tls.caFile) result.tls.caFile = options.tls.caFile;
    if (options.tls.certFile) result.tls.certFile = options.tls.certFile;
    if (options.tls.keyFile) result.tls.keyFile = options.tls.keyFile;
  }
  return result;
}

/**
 * Whether a connection with no credentials at all can send a request on `subject` and get a reply:
 * true means anyone who reaches `url` can talk to whoever answers there.
 */
export async function answersAnonymously(url: string, subject: string, timeoutMs = 1500): Promise<boolean> {
  let nc: NatsConnection;
  try {
    nc = await connect({
      servers: url.split(",").map((server) => server.trim()),
      name: "troupe-open-probe",
      maxReconnectAttempts: 0,
      reconnect: false,
      timeout: timeoutMs,
    });
  } catch {
    return false;
  }
  try {
    const probe = JSON.stringify({
      v: 1,
      id: "open-probe",
      ts: Date.now(),
      runId: "probe",
      agentId: "probe",
      seq: 0,
      type: "probe",
      data: {},
    });
    await nc.request(subject, probe, { timeout: timeoutMs });
    return true;
  } catch {
    return false;
  } finally {
    await nc.close().catch(() => {});
  }
}

/** Whether a client with no credentials at all is let in at `url`. */
export async function acceptsAnonymous(url: string, timeoutMs = 1500): Promise<boolean> {
  try {
    const nc = await connect({
      servers: url.split(",").map((server) => server.trim()),
      name: "troupe-open-probe",
      maxReconnectAttempts: 0,
      reconnect: false,
      timeout: timeoutMs,
    });
    await nc.close().catch(() => {});
    return true;
  } catch {
    return false;
  }
}

/** The server offered no TLS, or a certificate the pinned CA did not sign (or not for this host). */
function isTlsRefusal(error: unknown): boolean {
  const text = describe(error);
  const code =
    (error as { code?: unknown; cause?: { code?: unknown } }).code ??
    (error as { cause?: { code?: unknown } }).cause?.code;
  return (
    /does not support 'tls'|is not available on this server|certificate|self[- ]signed|Hostname\/IP does not match/i.test(
      text,
    ) ||
    (typeof code === "string" && /CERT|SELF_SIGNED|UNABLE_TO|ALTNAME/.test(code))
  );
}

/** Authorization failures are final; a refused or timed-out connection may come up. */
function isRetryable(error: unknown): boolean {
  const name = error instanceof Error ? error.name : "";
  return !/Authoriz|Authentication|Permission/.test(name) && !/authoriz/i.test(describe(error));
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.message}${cause}`;
}

function watchStatus(nc: NatsConnection, log: Logger, inboxPrefix: string | undefined): void {
  void (async () => {
    for await (const status of nc.status()) {
      switch (status.type) {
        case "disconnect":
          log.warn({ server: status.server }, "disconnected from NATS; reconnecting");
          break;
        case "reconnect":
          log.info({ server: status.server }, "reconnected to NATS");
          break;
        case "error": {
          const refused = status.error instanceof errors.PermissionViolationError ? status.error : undefined;
          if (!refused) {
            log.error({ err: status.error }, "NATS connection error");
            break;
          }
          // A refused request fails where it was made, and a refused reply inbox fails the connect
          // with one line of its own (NatsBus.connect): a log line of it too is noise.
          const { operation, subject } = refused;
          const reported =
            subject.startsWith("$JS.API.") || (inboxPrefix && subject.startsWith(`${inboxPrefix}.`));
          if (reported) log.debug({ operation, subject }, "NATS refused this (permissions)");
          else log.warn({ operation, subject }, "NATS refused this (permissions)");
          break;
        }
        case "ldm":
          log.warn({ server: status.server }, "NATS server entering lame duck mode");
          break;
        default:
          log.trace({ status: status.type }, "NATS status");
      }
    }
  })();
}
