import { describe, expect, it } from "vitest";
import { followChild } from "../../src/actors/follow-child.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { makeEnvelope } from "../../src/events/envelope.js";
import { ZERO_USAGE } from "../../src/model/types.js";

const usage = (inputTokens: number) => ({ ...ZERO_USAGE, inputTokens });

/** One event of the child `child-1` of run `run-1`, as its host (of placement `epoch`) logs it. */
function event(seq: number, type: string, data: unknown, epoch = 0) {
  return makeEnvelope({ runId: "run-1", agentId: "child-1", seq, type, data, ...(epoch ? { epoch } : {}) });
}
const stopped = (reason: string, inputTokens: number) => ({
  reason,
  result: `${reason} answer`,
  turns: 1,
  usage: usage(inputTokens),
  toolCalls: 0,
  total: { usage: usage(inputTokens), toolCalls: 0 },
});

describe("followChild", () => {
  it("yields what the child has spent, then how it stopped, and ends there", async () => {
    const bus = new LocalBus({ prefix: "fc" });
    const news = followChild(bus, "run-1", "child-1");
    await bus.eventLog.append(event(0, "usage.updated", { usage: usage(10), toolCalls: 1, turns: 1 }));
    await bus.eventLog.append(event(1, "agent.stopped", stopped("done", 12)));
    // Nothing after its stop is its news.
    await bus.eventLog.append(event(2, "usage.updated", { usage: usage(99), toolCalls: 9, turns: 9 }));
    const seen = [];
    for await (const item of news) seen.push(item);
    expect(seen).toEqual([{ spent: { usage: usage(10), toolCalls: 1 } }, { stopped: stopped("done", 12) }]);
    await bus.close();
  });

  it("drops what a worker that lost the child still sends once the new one has spoken", async () => {
    const bus = new LocalBus({ prefix: "fc" });
    const news = followChild(bus, "run-1", "child-1");
    await bus.eventLog.append(event(3, "usage.updated", { usage: usage(5), toolCalls: 0, turns: 1 }, 2));
    // The old host's late words: an older epoch.
    await bus.eventLog.append(event(4, "agent.stopped", stopped("failed", 1), 1));
    await bus.eventLog.append(event(4, "agent.stopped", stopped("done", 6), 2));
    const seen = [];
    for await (const item of news) seen.push(item);
    expect(seen).toEqual([{ spent: { usage: usage(5), toolCalls: 0 } }, { stopped: stopped("done", 6) }]);
    await bus.close();
  });

  it("stops listening when its reader gives up: a waiting read ends, nothing more is buffered", async () => {
    const bus = new LocalBus({ prefix: "fc" });
    const news = followChild(bus, "run-1", "child-1");
    const waiting = news.next();
    await news.return?.();
    expect(await waiting).toEqual({ value: undefined, done: true });
    await bus.eventLog.append(event(0, "agent.stopped", stopped("done", 1)));
    expect(await news.next()).toEqual({ value: undefined, done: true });
    await bus.close();
  });
});
