/**
 * The console's API, from the page: each request carries the session a login put in the page, kept
 * in this origin's storage (a cookie would go to every port of the console's host, not just its own).
 */

const SESSION_KEY = "troupe-session";

/**
 * Whether the console that served this page has gone. A live stream breaks when its daemon stops or
 * restarts, and whatever answers at this address afterwards need not be the console: a restarted
 * daemon listens on a new port (and has forgotten this page's session), and another user of the
 * machine may hold the old one. So the page follows nothing and sends nothing there again, the
 * session least of all; it says the console went away (docs/web.md).
 */
let gone = false;
const sources = new Set<EventSource>();
const goneListeners = new Set<() => void>();

/** A request the page did not send: its console has gone. */
export class ConsoleGoneError extends Error {
  override name = "ConsoleGoneError";
}

/** Calls `listener` once the console has gone (at once if it has); returns what stops listening. */
export function whenGone(listener: () => void): () => void {
  if (gone) listener();
  else goneListeners.add(listener);
  return () => goneListeners.delete(listener);
}

function wentAway(): void {
  if (gone) return;
  gone = true;
  for (const source of sources) source.close();
  sources.clear();
  for (const listener of goneListeners) listener();
  goneListeners.clear();
}

/** A request to the console, unless it has gone; a request that cannot reach it at all says it has. */
async function request(path: string, init: RequestInit): Promise<Response> {
  if (gone) throw new ConsoleGoneError(`${path}: not sent, the console has gone`);
  try {
    return await fetch(path, init);
  } catch (error) {
    wentAway();
    throw new ConsoleGoneError(`${path}: the console did not answer`, { cause: error });
  }
}

/**
 * Takes the session a login page carries into this origin's storage, and the login URL (its token
 * used up) out of the address bar. Whether the page has a session.
 */
export function takeSession(): boolean {
  const given = document.querySelector('meta[name="troupe-session"]')?.getAttribute("content");
  if (given) {
    localStorage.setItem(SESSION_KEY, given);
    history.replaceState(null, "", "/");
  }
  return localStorage.getItem(SESSION_KEY) !== null;
}

function session(): string {
  return localStorage.getItem(SESSION_KEY) ?? "";
}

export async function post<T = unknown>(path: string, body: unknown): Promise<T> {
  const response = await request(path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${session()}` },
    body: JSON.stringify(body),
  });
  const value = (await response.json()) as T & { error?: string };
  if (!response.ok) throw new Error(value.error ?? `${response.status}`);
  return value;
}

export async function get<T = unknown>(path: string): Promise<T> {
  const response = await request(path, { headers: { authorization: `Bearer ${session()}` } });
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return (await response.json()) as T;
}

/**
 * Follows a Server-Sent Events stream; `on` gets the data of each event, parsed. Those that come
 * within one animation frame are handed over together, so a burst costs one render, not hundreds.
 * The first break of any stream means the console has gone: an EventSource left to itself would
 * reconnect, session in its URL, to whatever holds the port by then.
 */
export function follow<T>(path: string, event: string, on: (items: T[]) => void): () => void {
  if (gone) return () => {};
  // An EventSource sends no headers of the page's choosing: the session goes in the query.
  const source = new EventSource(`${path}?session=${encodeURIComponent(session())}`);
  sources.add(source);
  // Closed here, in the handler, the source never makes the reconnection it had scheduled.
  source.addEventListener("error", wentAway);
  let pending: T[] = [];
  let frame: number | undefined;
  source.addEventListener(event, (message) => {
    pending.push(JSON.parse((message as MessageEvent<string>).data) as T);
    frame ??= requestAnimationFrame(() => {
      frame = undefined;
      const items = pending;
      pending = [];
      on(items);
    });
  });
  return () => {
    source.close();
    sources.delete(source);
    if (frame !== undefined) cancelAnimationFrame(frame);
  };
}

export function formatTokens(n: number): string {
  return n >= 1_000_000 ? `${(n / 1_000_000).toFixed(1)}M` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : `${n}`;
}

export function formatAge(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d`;
}
