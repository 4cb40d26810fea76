import type { IncomingMessage, ServerResponse } from "node:http";

/** One page's Server-Sent Events stream. */
export interface EventStream {
  send(event: string, data: unknown): void;
  /** Aborted when the page goes away. */
  readonly closed: AbortSignal;
}

/** A comment now and then keeps proxies and the browser from taking a quiet stream for a dead one. */
export const KEEPALIVE_MS = 15_000;

/** Answers a request with a stream of events, until the page goes (or `until` aborts). */
export function openEventStream(
  request: IncomingMessage,
  response: ServerResponse,
  until?: AbortSignal,
): EventStream {
  const closing = new AbortController();
  response.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-store",
    connection: "keep-alive",
    "x-content-type-options": "nosniff",
  });
  response.flushHeaders();
  const keepalive = setInterval(() => response.write(": keepalive\n\n"), KEEPALIVE_MS);
  const close = () => {
    clearInterval(keepalive);
    closing.abort();
    response.end();
  };
  request.once("close", close);
  until?.addEventListener("abort", close, { once: true });
  return {
    closed: closing.signal,
    send(event, data) {
      if (!closing.signal.aborted) response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
  };
}
