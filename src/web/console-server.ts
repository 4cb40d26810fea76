import { createServer, type IncomingMessage, type RequestListener, type Server } from "node:http";
import type { Logger } from "../log.js";
import { KEEPALIVE_MS } from "./server-events.js";

/**
 * What anyone who reaches the console's port (every user of the machine, on 127.0.0.1) can hold of
 * it, and for how long. Past `maxConnections` a connection is closed as it comes, so connections
 * opened by the thousand take the console's share of file descriptors, never the daemon's (its
 * model calls, NATS, sandboxes).
 */
export const CONSOLE_LIMITS = {
  /** Connections open at once; a browser's page holds a few (two of them live streams). */
  maxConnections: 256,
  /** From a request's first byte to the end of its headers. */
  headersTimeoutMs: 10_000,
  /** From a request's first byte to the end of its body. Not the response: a live stream lasts as long as its page. */
  requestTimeoutMs: 15_000,
  /** A connection on which nothing moves for this long is closed, unless its request carries a session. */
  idleMs: 10_000,
  /** The same for a request that carries a session: a live stream sends a keepalive every KEEPALIVE_MS. */
  sessionIdleMs: 4 * KEEPALIVE_MS,
  /** How often the header and request deadlines are checked (Node's default, 30 s, would let them run long). */
  checkEveryMs: 1_000,
  /** A console at its connection limit says so in the log at most this often. */
  warnEveryMs: 60_000,
} as const;

/** The console's address could not be listened on: another process holds the port, or it is not this machine's. */
export class ConsoleListenError extends Error {
  override name = "ConsoleListenError";
}

/** An HTTP server held to CONSOLE_LIMITS; it logs (now and then) when it turns connections away. */
export function consoleServer(handle: RequestListener, log: Logger): Server {
  const limits = CONSOLE_LIMITS;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.checkEveryMs,
    },
    handle,
  );
  server.maxConnections = limits.maxConnections;
  // Without a 'timeout' listener, Node closes a socket that stays quiet this long.
  server.timeout = limits.idleMs;
  let warned = Number.NEGATIVE_INFINITY;
  server.on("drop", () => {
    if (Date.now() - warned < limits.warnEveryMs) return;
    warned = Date.now();
    log.warn(
      { maxConnections: limits.maxConnections },
      "web console: at its connection limit; more connections are closed as they come",
    );
  });
  return server;
}

/** Listens at `host:port`; a `ConsoleListenError`, saying why in words for a person, when that cannot be had. */
export function listenAt(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) =>
      reject(new ConsoleListenError(listenProblem(host, port, error), { cause: error })),
    );
    server.listen(port, host, resolve);
  });
}

/** A request that carries a session may be quiet longer: between a live stream's keepalives, or while its answer is made. */
export function allowSessionIdle(request: IncomingMessage): void {
  request.socket.setTimeout(CONSOLE_LIMITS.sessionIdleMs);
}

function listenProblem(host: string, port: number, error: NodeJS.ErrnoException): string {
  const address = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  if (error.code === "EADDRINUSE") return `${address} is taken by another process`;
  if (error.code === "EADDRNOTAVAIL") return `${address} is not an address of this machine`;
  if (error.code === "EACCES") return `${address} may not be listened on by this user`;
  return `cannot listen on ${address}: ${error.message}`;
}
