import { describe, expect, it } from "vitest";
import { EventPublisher, TEXT_HOLD_CHARS } from "../../src/actors/event-publisher.js";
import type { AppendAck } from "../../src/bus/bus.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { Envelope } from "../../src/events/envelope.js";
import { silentLogger } from "../../src/log.js";
import { Redactor } from "../../src/safety/redact.js";

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
    events.emit("state.changed", changed);
    await new Promise((resolve) => setImmediate(resolve));
    expect(appends).toEqual([["state.changed"]]);
    let flushed = false;
    void events.flushed().then(() => (flushed = true));
    release();
    await events.flushed();
    expect(flushed).toBe(true);
    expect(appends).toEqual([["state.changed"], ["model.delta", "state.changed"]]);
    const logged: Array<[number, string]> = [];
    for await (const { envelope } of bus.eventLog.read({ runId: "r1" }))
      logged.push([envelope.seq, envelope.type]);
    expect(logged).toEqual([
      [0, "state.changed"],
      [1, "model.delta"],
      [2, "state.changed"],
    ]);
  });

  it("merges adjacent text of one kind into one event with one seq, sent before any other event", async () => {
    const { bus, appends } = recordingBus();
    const events = new EventPublisher(bus, "r1", "a1", undefined, silentLogger, undefined);
    events.emit("model.reasoning", { text: "think " });
    events.emit("model.reasoning", { text: "hard" });
    events.emit("model.delta", { text: "Hel" });
    events.emit("model.delta", { text: "lo" });
    events.emit("model.delta", { text: "!" });
    events.emit("state.changed", changed);
    events.emit("model.delta", { text: "again" });
    await events.flushed();
    expect(appends.flat()).toEqual(["model.reasoning", "model.delta", "state.changed", "model.delta"]);
    expect(await logged(bus)).toEqual([
      [0, "model.reasoning", { text: "think hard" }],
      [1, "model.delta", { text: "Hello!" }],
      [2, "state.changed", changed],
      [3, "model.delta", { text: "again" }],
    ]);
    expect(events.nextSeq).toBe(4);
  });

  it("holds streamed text a moment when nothing else comes, then sends it by itself", async () => {
    const { bus, appends } = recordingBus();
    const events = new EventPublisher(bus, "r1", "a1", undefined, silentLogger, undefined);
    events.emit("model.delta", { text: "a" });
    await new Promise((resolve) => setImmediate(resolve));
    events.emit("model.delta", { text: "b" });
    expect(appends).toEqual([]);
    await waitUntil(() => appends.length > 0);
    await events.flushed();
    expect(await logged(bus)).toEqual([[0, "model.delta", { text: "ab" }]]);
  });

  it("sends held text at once when it reaches the size bound", async () => {
    const { bus, appends } = recordingBus();
    const events = new EventPublisher(bus, "r1", "a1", undefined, silentLogger, undefined);
    const chunk = "x".repeat(128);
    for (let i = 0; i < TEXT_HOLD_CHARS / 128 + 4; i++) events.emit("model.delta", { text: chunk });
    await new Promise((resolve) => setImmediate(resolve));
    expect(appends).toEqual([["model.delta"]]);
    await events.flushed();
    const texts = (await logged(bus)).map(([, , data]) => (data as { text: string }).text.length);
    expect(texts).toEqual([TEXT_HOLD_CHARS, 512]);
  });

  it("redacts the merged text, so a secret streamed in pieces is hidden whole", async () => {
    const { bus } = recordingBus();
    const secret = "hunter2-very-secret-value";
    const redactor = new Redactor([secret]);
    const events = new EventPublisher(bus, "r1", "a1", undefined, silentLogger, redactor);
    events.emit("model.delta", { text: `the token is ${secret.slice(0, 9)}` });
    events.emit("model.delta", { text: secret.slice(9) });
    await events.flushed();
    const [[, , data]] = (await logged(bus)) as [[number, string, { text: string }]];
    expect(data.text).not.toContain(secret.slice(0, 9));
    expect(data.text).toContain("the token is");
  });
});

async function logged(bus: LocalBus): Promise<Array<[number, string, unknown]>> {
  const events: Array<[number, string, unknown]> = [];
  for await (const { envelope } of bus.eventLog.read({ runId: "r1" }))
    events.push([envelope.seq, envelope.type, envelope.data]);
  return events;
}

async function waitUntil(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
}
