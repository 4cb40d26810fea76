import { AsyncQueue } from "../bus/async-queue.js";
import type { Bus, Subscription } from "../bus/bus.js";
import { EventFilter } from "../bus/event-filter.js";
import { isEvent } from "../events/agent-events.js";
import type { AgentOutput, Spend } from "../machines/agent-types.js";

/** What a parent hears of a running child: what it has spent so far (a running total), then how it stopped. */
export type ChildNews = { spent: Spend } | { stopped: AgentOutput };

/**
 * A child's news from the bus, in order: each `usage.updated` as `spent`, then its `agent.stopped`
 * as `stopped`, after which it ends. It listens from the moment it is called, so nothing the child
 * says after that is missed, until then or until its reader returns. What a worker that lost the
 * child to another still sends is not the child's, and is dropped (`EventFilter`). How long to
 * wait for the child is the reader's to decide, not this.
 */
export function followChild(bus: Bus, runId: string, childId: string): AsyncIterableIterator<ChildNews> {
  const current = new EventFilter(false);
  let subscription: Subscription | undefined;
  const news = new AsyncQueue<ChildNews>(undefined, () => subscription?.unsubscribe());
  subscription = bus.subscribe(bus.subjects.agentEvents(runId, childId), (envelope) => {
    if (!current.accept(envelope)) return;
    if (isEvent(envelope, "usage.updated")) {
      news.push({ spent: { usage: envelope.data.usage, toolCalls: envelope.data.toolCalls } });
    } else if (isEvent(envelope, "agent.stopped")) {
      news.push({ stopped: envelope.data });
      news.end();
    }
  });
  // Ended before the subscription was made (it cannot be, but a bus may call back at once).
  if (news.ended) subscription.unsubscribe();
  return news;
}
