import { describe, expect, it } from "vitest";
import { EventPublisher } from "../../src/actors/event-publisher.js";
import type { AppendAck } from "../../src/bus/bus.js";
import type { Envelope } from "../../src/bus/envelope.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { silentLogger } from "../../src/log.js";

/** A LocalBus whose appends are recorded, each held until `release` when `hold` is set. */
function recordingBus() {
  const bus = new LocalBus({ prefix: "pubtest" });
  const appendAll = bus.eventLog.appendAll.bind(bus.eventLog);
  const appends: string[][] = [];
  const held: Array<() => void> = [];
  let hold = false;
  bus.eventLog.appendAll = async (envelopes: readonly Envelope[]): Promise<AppendAck> => {
    appends.push(envelopes.map((envelope) => envelope.type));
    if (hold) await new Promise<void>((resolve) => held.push(resolve));
    return appendAll(envelopes);
  };
  return {
    bus,
    appends,
    holdAppends: () => (hold = true),
    release: () => {
      hold = false;
      for (const resolve of held.splice(0)) resolve();
    },
  };
}

const changed = { from: "idle", to: "callingModel" };

describe("EventPublisher", () => {
  it("sends the events of one stretch of work in one append, not the first alone", async () => {
    const { bus, appends } = recordingBus();
    const events = new EventPublisher(bus, "r1", "a1", undefined, silentLogger, undefined);
    events.emit("state.changed", changed);
    events.emit("model.delta", { text: "hi" });
    events.emit("state.changed", changed);
    await events.flushed();
    expect(appends).toEqual([["state.changed", "model.delta", "state.changed"]]);
  });

  it("keeps one append in flight; what is made meanwhile follows in the next, in order and numbered", async () => {
    const { bus, appends, holdAppends, release } = recordingBus();
    const events = new EventPublisher(bus, "r1", "a1", undefined, silentLogger, undefined);
    holdAppends();
    events.emit("state.changed", changed);
    await new Promise((resolve) => setImmediate(resolve));
    events.emit("model.delta", { text: "a" });
    events.emit("model.delta", { text: "b" });
    await new Promise((resolve) => setImmediate(resolve));
    expect(appends).toEqual([["state.changed"]]);
    let flushed = false;
    void events.flushed().then(() => (flushed = true));
    release();
    await events.flushed();
    expect(flushed).toBe(true);
    expect(appends).toEqual([["state.changed"], ["model.delta", "model.delta"]]);
    const logged: Array<[number, string]> = [];
    for await (const { envelope } of bus.eventLog.read({ runId: "r1" }))
      logged.push([envelope.seq, envelope.type]);
    expect(logged).toEqual([
      [0, "state.changed"],
      [1, "model.delta"],
      [2, "model.delta"],
    ]);
  });
});
