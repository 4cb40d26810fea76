import { randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";

/** The cookie a login sets: the session, for this origin's pages only. */
export const SESSION_COOKIE = "troupe_session";

/**
 * Who may use the web console. A login token is good once: it is exchanged for a session, carried
 * by a cookie (HttpOnly, SameSite=Strict) or, for scripts, an `Authorization: Bearer` header. The
 * daemon prints one at start and keeps one in its data dir for `troupe web`; each use makes another.
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

  /** Whether the request carries a session this console made. */
  allows(request: IncomingMessage): boolean {
    const presented = bearer(request) ?? cookie(request, SESSION_COOKIE);
    return presented !== undefined && [...this.#sessions].some((session) => same(session, presented));
  }
}

/**
 * Why a request that changes something is refused as cross-site, or undefined. A page of another
 * site cannot send the session cookie (SameSite=Strict), nor JSON without a preflight this console
 * never answers; the browser's own word (`Sec-Fetch-Site`, `Origin`) is checked as well.
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

function bearer(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  return header?.startsWith("Bearer ") ? header.slice("Bearer ".length) : undefined;
}

function cookie(request: IncomingMessage, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return undefined;
}
