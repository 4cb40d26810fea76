import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

/**
 * Who may use the web console. A login token is good once: it is exchanged for a session, which the
 * page keeps in its own storage and sends as an `Authorization: Bearer` header (scripts do the same).
 * Never in a cookie: a browser sends 127.0.0.1's cookies to every port of it, SameSite=Strict or not,
 * so a server another user runs on a port beside the console would be handed the session. The daemon
 * prints a login at start and keeps one in its data dir for `troupe web`; each use makes another.
 */
export class WebAuth {
  #logins = new Set<string>();
  #sessions = new Set<string>();
  /** Told after each login (the daemon then keeps a fresh login for `troupe web`). */
  onLogin: (() => void) | undefined;

  /** A new one-time login token. */
  newLogin(): string {
    const token = secret();
    this.#logins.add(token);
    return token;
  }

  /** Exchanges a login token for a new session, once; undefined when the token is not one. */
  login(token: string): string | undefined {
    const found = [...this.#logins].find((login) => same(login, token));
    if (!found) return undefined;
    this.#logins.delete(found);
    const session = secret();
    this.#sessions.add(session);
    this.onLogin?.();
    return session;
  }

  /**
   * Whether the request carries a session this console made: as a Bearer header, or, for a GET of
   * an event stream, in the `session` parameter (a page's EventSource can send no header). Nowhere
   * else: a URL with a session in it ends up in histories, logs and Referer headers.
   */
  allows(request: IncomingMessage, url: URL): boolean {
    const inQuery = request.method === "GET" && isEventStream(url.pathname);
    const presented = bearer(request) ?? (inQuery ? url.searchParams.get("session") : null);
    return presented !== null && [...this.#sessions].some((session) => same(session, presented));
  }
}

/** The paths a page follows with an EventSource: the runs, live, and one run's events. */
export function isEventStream(path: string): boolean {
  return path === "/api/runs/live" || /^\/api\/runs\/[A-Za-z0-9_-]+\/events$/.test(path);
}

/**
 * Why a request that changes something is refused as cross-site, or undefined. Another site's page
 * has no session to send, nor can it send JSON without a preflight this console never answers; the
 * browser's own word (`Sec-Fetch-Site`, `Origin`) is checked as well.
 */
export function crossSite(request: IncomingMessage): string | undefined {
  const site = request.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin" && site !== "none") return `a ${site} request`;
  const origin = request.headers.origin;
  if (origin !== undefined && origin !== `http://${request.headers.host}`) return `from ${origin}`;
  const type = request.headers["content-type"] ?? "";
  if (!type.startsWith("application/json")) return "not JSON";
  return undefined;
}

function secret(): string {
  return randomBytes(24).toString("base64url");
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function bearer(request: IncomingMessage): string | null {
  const header = request.headers.authorization;
  return header?.startsWith("Bearer ") ? header.slice("Bearer ".length) : null;
}
