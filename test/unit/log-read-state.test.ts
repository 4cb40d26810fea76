import { describe, expect, it } from "vitest";
import {
  delivered,
  GIVE_UP_MS,
  HEARTBEAT_MS,
  HIGH_WATER,
  type LogRead,
  type LogReadInput,
  openingRead,
  SILENCE_MS,
  step,
  taken,
} from "../../src/bus/log-read-state.js";

/** A point in time; the machine has no clock of its own. */
const T = 1_000_000;

/** A read as the I/O side would have it, flow-control requests being strings here. */
function readAt(fields: Partial<LogRead<string>> = {}, follow = false): LogRead<string> {
  return { ...openingRead<string>(follow, T - 100), ...fields };
}

/** A read whose consumer has delivered up to delivery `deliverySeq`, stream seq `nextStreamSeq - 1`. */
function reading(fields: Partial<LogRead<string>> = {}, follow = false): LogRead<string> {
  return readAt({ phase: "reading", deliverySeq: 4, nextStreamSeq: 40, ...fields }, follow);
}

const input = (value: LogReadInput<string>) => value;
const failure = new Error("no responders");
const makeAgain = (from: number, why: string) => [{ do: "drop" }, { do: "make", from, why }];

describe("the log read: its first consumer", () => {
  it("starts opening, from where the read's `from` says, having heard its consumer now", () => {
    expect(openingRead(true, T)).toEqual({
      phase: "opening",
      follow: true,
      held: undefined,
      deliverySeq: 0,
      nextStreamSeq: 0,
      lastHeard: T,
      failingSince: 0,
    });
  });

  it("opened with messages pending: reading, and the silence watch starts", () => {
    const read = readAt();
    expect(step(read, input({ type: "opened", pending: 3 }), T)).toEqual([{ do: "watch" }]);
    expect(read.phase).toBe("reading");
  });

  it("opened with none pending, not following: the read ends, no watch", () => {
    const read = readAt();
    expect(step(read, input({ type: "opened", pending: 0 }), T)).toEqual([{ do: "end" }]);
    expect(read.phase).toBe("reading");
  });

  it("opened with none pending, following: it waits for what comes, watching", () => {
    const read = readAt({}, true);
    expect(step(read, input({ type: "opened", pending: 0 }), T)).toEqual([{ do: "watch" }]);
    expect(read.phase).toBe("reading");
  });

  it("opened while a reset began meanwhile: the reset goes on, and the watch starts", () => {
    const read = readAt({ phase: "resetting" });
    expect(step(read, input({ type: "opened", pending: 5 }), T)).toEqual([{ do: "watch" }]);
    expect(read.phase).toBe("resetting");
  });

  it("opened after the read was closed (aborted while it was made): the consumer is dropped", () => {
    const read = readAt({ phase: "closed" });
    expect(step(read, input({ type: "opened", pending: 5 }), T)).toEqual([{ do: "drop" }]);
    expect(read.phase).toBe("closed");
  });

  it("not opened: the consumer is dropped and the read abandoned, what waits with it", () => {
    const read = readAt({ held: "fc" });
    expect(step(read, input({ type: "open-failed", error: failure }), T)).toEqual([
      { do: "drop" },
      { do: "abandon" },
    ]);
    expect(read.held).toBeUndefined();
  });

  it("not opened after the read was closed: only the consumer is dropped", () => {
    const read = readAt({ phase: "closed" });
    expect(step(read, input({ type: "open-failed", error: failure }), T)).toEqual([{ do: "drop" }]);
  });
});

describe("the log read: deliveries", () => {
  it("in sequence: pushed, and the read goes on after its stream seq", () => {
    const read = reading();
    expect(delivered(read, { streamSeq: 41, deliverySeq: 5, pending: 9 }, T)).toEqual([{ do: "push" }]);
    expect(read).toMatchObject({ phase: "reading", deliverySeq: 5, nextStreamSeq: 42, lastHeard: T });
  });

  it("the same through step, as an input", () => {
    const read = reading();
    const effects = step(read, input({ type: "delivered", streamSeq: 41, deliverySeq: 5, pending: 9 }), T);
    expect(effects).toEqual([{ do: "push" }]);
    expect(read.deliverySeq).toBe(5);
  });

  it("the last one, not following: pushed, then the read ends", () => {
    const read = reading();
    expect(delivered(read, { streamSeq: 41, deliverySeq: 5, pending: 0 }, T)).toEqual([
      { do: "push" },
      { do: "end" },
    ]);
  });

  it("none pending while following: pushed, and the read goes on", () => {
    const read = reading({}, true);
    expect(delivered(read, { streamSeq: 41, deliverySeq: 5, pending: 0 }, T)).toEqual([{ do: "push" }]);
  });

  it("before the first consumer's answer: pushed (the server delivers as soon as it made it)", () => {
    const read = readAt();
    expect(delivered(read, { streamSeq: 1, deliverySeq: 1, pending: 2 }, T)).toEqual([{ do: "push" }]);
    expect(read).toMatchObject({ phase: "opening", deliverySeq: 1, nextStreamSeq: 2 });
  });

  it("out of sequence: not pushed; the consumer is made again from after the last one read", () => {
    const read = reading({ held: "fc" });
    expect(delivered(read, { streamSeq: 43, deliverySeq: 7, pending: 9 }, T)).toEqual(
      makeAgain(40, "a delivery out of sequence"),
    );
    expect(read).toMatchObject({
      phase: "resetting",
      held: undefined,
      deliverySeq: 0,
      nextStreamSeq: 40,
      lastHeard: T,
    });
  });

  it("a repeated delivery is out of sequence too", () => {
    const read = reading();
    expect(delivered(read, { streamSeq: 39, deliverySeq: 4, pending: 9 }, T)).toEqual(
      makeAgain(40, "a delivery out of sequence"),
    );
  });

  it("out of sequence while resetting: the reset under way is waited for", () => {
    const read = reading({ phase: "resetting", deliverySeq: 0 });
    expect(delivered(read, { streamSeq: 50, deliverySeq: 3, pending: 9 }, T)).toEqual([]);
    expect(read).toMatchObject({ phase: "resetting", deliverySeq: 0, nextStreamSeq: 40, lastHeard: T });
  });

  it("after the read closed: nothing", () => {
    const read = reading({ phase: "closed" });
    expect(delivered(read, { streamSeq: 41, deliverySeq: 5, pending: 0 }, T)).toEqual([]);
    expect(read).toMatchObject({ deliverySeq: 4, nextStreamSeq: 40, lastHeard: T - 100 });
  });
});

describe("the log read: flow control", () => {
  it("answered at once while the reader's backlog is under HIGH_WATER", () => {
    const read = reading();
    const effects = step(read, input({ type: "flow-control", request: "fc", queued: HIGH_WATER - 1 }), T);
    expect(effects).toEqual([{ do: "respond", request: "fc" }]);
    expect(read).toMatchObject({ phase: "reading", held: undefined, lastHeard: T });
  });

  it("held while the backlog is HIGH_WATER or more", () => {
    const read = reading();
    expect(step(read, input({ type: "flow-control", request: "fc", queued: HIGH_WATER }), T)).toEqual([]);
    expect(read).toMatchObject({ phase: "reading", held: "fc", lastHeard: T });
  });

  it("held ones are answered when the reader has taken the backlog under a quarter of HIGH_WATER", () => {
    const read = reading({ held: "fc" });
    expect(taken(read, HIGH_WATER / 4)).toEqual([]);
    expect(read.held).toBe("fc");
    expect(step(read, input({ type: "taken", queued: HIGH_WATER / 4 - 1 }), T)).toEqual([
      { do: "respond", request: "fc" },
    ]);
    expect(read.held).toBeUndefined();
  });

  it("a take with nothing held does nothing", () => {
    const read = reading();
    expect(taken(read, 0)).toEqual([]);
    expect(read).toEqual(reading());
  });

  it("after the read closed: not answered", () => {
    const read = reading({ phase: "closed" });
    expect(step(read, input({ type: "flow-control", request: "fc", queued: 0 }), T)).toEqual([]);
    expect(read.held).toBeUndefined();
  });
});

describe("the log read: heartbeats and the consumer gone", () => {
  it("a heartbeat that names no delivery missed: the consumer is alive, nothing to do", () => {
    const read = reading();
    expect(step(read, input({ type: "heartbeat", lastConsumer: 4, stalled: undefined }), T)).toEqual([]);
    expect(read).toMatchObject({ phase: "reading", lastHeard: T });
  });

  it("stalled on a flow-control answer that was lost: answered again on the stalled subject", () => {
    const read = reading();
    const effects = step(read, input({ type: "heartbeat", lastConsumer: 4, stalled: "$JS.FC.x" }), T);
    expect(effects).toEqual([{ do: "publish", subject: "$JS.FC.x" }]);
    expect(read.phase).toBe("reading");
  });

  it("stalled on a request held here: left held, the reader answers it when it catches up", () => {
    const read = reading({ held: "fc" });
    expect(step(read, input({ type: "heartbeat", lastConsumer: 4, stalled: "$JS.FC.x" }), T)).toEqual([]);
    expect(read.held).toBe("fc");
  });

  it("a heartbeat after deliveries that never came: the consumer is made again", () => {
    const read = reading();
    expect(step(read, input({ type: "heartbeat", lastConsumer: 6, stalled: undefined }), T)).toEqual(
      makeAgain(40, "a heartbeat after deliveries that never came"),
    );
    expect(read).toMatchObject({ phase: "resetting", deliverySeq: 0 });
  });

  it("stalled, and after deliveries that never came: answered, then made again", () => {
    const read = reading();
    expect(step(read, input({ type: "heartbeat", lastConsumer: 6, stalled: "$JS.FC.x" }), T)).toEqual([
      { do: "publish", subject: "$JS.FC.x" },
      ...makeAgain(40, "a heartbeat after deliveries that never came"),
    ]);
  });

  it("the consumer gone (409): made again from after the last one read", () => {
    const read = reading({ held: "fc" });
    expect(step(read, input({ type: "gone", description: "consumer deleted" }), T)).toEqual(
      makeAgain(40, "the consumer is gone (consumer deleted)"),
    );
    expect(read).toMatchObject({ phase: "resetting", held: undefined, deliverySeq: 0, lastHeard: T });
  });

  it("gone while resetting: the reset under way is waited for", () => {
    const read = reading({ phase: "resetting" });
    expect(step(read, input({ type: "gone", description: "consumer deleted" }), T)).toEqual([]);
    expect(read.phase).toBe("resetting");
  });

  it("anything else heard on the inbox: the consumer is alive", () => {
    const read = reading();
    expect(step(read, input({ type: "heard" }), T)).toEqual([]);
    expect(read).toMatchObject({ phase: "reading", lastHeard: T });
  });
});

describe("the log read: silence", () => {
  it("a tick after more than SILENCE_MS heard nothing: the consumer is made again", () => {
    const read = reading({ lastHeard: T - SILENCE_MS - 1 });
    expect(step(read, input({ type: "tick" }), T)).toEqual(makeAgain(40, "no heartbeat"));
    expect(read).toMatchObject({ phase: "resetting", deliverySeq: 0, lastHeard: T });
  });

  it("a tick at SILENCE_MS: not yet", () => {
    const read = reading({ lastHeard: T - SILENCE_MS });
    expect(step(read, input({ type: "tick" }), T)).toEqual([]);
    expect(read.phase).toBe("reading");
  });

  it("a silent tick while resetting: the reset under way is waited for", () => {
    const read = reading({ phase: "resetting", lastHeard: T - 10 * SILENCE_MS });
    expect(step(read, input({ type: "tick" }), T)).toEqual([]);
  });

  it("a tick after the read closed: nothing", () => {
    const read = reading({ phase: "closed", lastHeard: T - 10 * SILENCE_MS });
    expect(step(read, input({ type: "tick" }), T)).toEqual([]);
    expect(read.phase).toBe("closed");
  });
});

describe("the log read: the consumer made again", () => {
  it("made: reading again, the failures so far forgotten", () => {
    const read = reading({ phase: "resetting", failingSince: T - 5000 });
    expect(step(read, input({ type: "made" }), T)).toEqual([]);
    expect(read).toMatchObject({ phase: "reading", failingSince: 0 });
  });

  it("made after the read closed: dropped", () => {
    const read = reading({ phase: "closed" });
    expect(step(read, input({ type: "made" }), T)).toEqual([{ do: "drop" }]);
    expect(read.phase).toBe("closed");
  });

  it("not made: lost, the consumer dropped, tried again a heartbeat from now", () => {
    const read = reading({ phase: "resetting" });
    expect(step(read, input({ type: "make-failed", error: failure }), T)).toEqual([{ do: "drop" }]);
    expect(read).toMatchObject({ phase: "lost", failingSince: T, lastHeard: T - SILENCE_MS + HEARTBEAT_MS });
    expect(step(read, input({ type: "tick" }), T + HEARTBEAT_MS)).toEqual([]);
    expect(step(read, input({ type: "tick" }), T + HEARTBEAT_MS + 1)).toEqual(makeAgain(40, "no heartbeat"));
    expect(read.phase).toBe("resetting");
  });

  it("not made again, failing since GIVE_UP_MS ago: lost, not failed yet", () => {
    const read = reading({ phase: "resetting", failingSince: T - GIVE_UP_MS });
    expect(step(read, input({ type: "make-failed", error: failure }), T)).toEqual([{ do: "drop" }]);
    expect(read).toMatchObject({ phase: "lost", failingSince: T - GIVE_UP_MS });
  });

  it("not made again, failing for over GIVE_UP_MS: the read fails with the last error", () => {
    const read = reading({ phase: "resetting", failingSince: T - GIVE_UP_MS - 1 });
    expect(step(read, input({ type: "make-failed", error: failure }), T)).toEqual([
      { do: "drop" },
      { do: "fail", error: failure },
    ]);
  });

  it("not made after the read closed: dropped, nothing more", () => {
    const read = reading({ phase: "closed" });
    expect(step(read, input({ type: "make-failed", error: failure }), T)).toEqual([{ do: "drop" }]);
    expect(read).toMatchObject({ phase: "closed", failingSince: 0 });
  });
});

describe("the log read: closed", () => {
  it("closed: the watch stops, the consumer goes, nothing is held", () => {
    const read = reading({ held: "fc" });
    expect(step(read, input({ type: "close" }), T)).toEqual([{ do: "unwatch" }, { do: "drop" }]);
    expect(read).toMatchObject({ phase: "closed", held: undefined });
  });

  it("closed while opening: the same", () => {
    const read = readAt();
    expect(step(read, input({ type: "close" }), T)).toEqual([{ do: "unwatch" }, { do: "drop" }]);
    expect(read.phase).toBe("closed");
  });

  it("closed twice: once", () => {
    const read = reading({ phase: "closed" });
    expect(step(read, input({ type: "close" }), T)).toEqual([]);
  });
});
