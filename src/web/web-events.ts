import type { IncomingMessage, ServerResponse } from "node:http";
import type { Bus } from "../bus/bus.js";
import type { Envelope } from "../events/envelope.js";
import { openEventStream } from "./server-events.js";

/** Events go out together when they come this close: one message for a burst, not one for each. */
const BATCH_MS = 25;
const BATCH_MAX = 500;

/**
 * A run's events to a page: from the first in the log (a page opened late catches up), then live,
 * in batches.
 */
export async function streamEvents(
  bus: Bus,
  runId: string,
  request: IncomingMessage,
  response: ServerResponse,
  until?: AbortSignal,
): Promise<void> {
  if (!/^[A-Za-z0-9_-]+$/.test(runId)) {
    response.writeHead(404).end();
    return;
  }
  const stream = openEventStream(request, response, until);
  let batch: Envelope[] = [];
  let timer: NodeJS.Timeout | undefined;
  const flush = () => {
    clearTimeout(timer);
    timer = undefined;
    if (batch.length) stream.send("events", batch);
    batch = [];
  };
  try {
    for await (const { envelope } of bus.eventLog.read({ runId, follow: true, signal: stream.closed })) {
      batch.push(envelope);
      if (batch.length >= BATCH_MAX) flush();
      else timer ??= setTimeout(flush, BATCH_MS);
    }
  } catch (error) {
    if (!stream.closed.aborted) throw error;
  } finally {
    clearTimeout(timer);
  }
}
