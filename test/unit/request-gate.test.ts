import { describe, expect, it } from "vitest";
import { newStats } from "../../src/bus/bus.js";
import { RequestGate } from "../../src/bus/request-gate.js";
import { silentLogger } from "../../src/log.js";

/** A request whose answer takes until `release()`; `ran` says whether it was answered at all. */
function request() {
  let release: () => void = () => {};
  const done = new Promise<void>((resolve) => (release = resolve));
  const state = { ran: false };
  return {
    state,
    release,
    answer: async () => {
      state.ran = true;
      await done;
    },
  };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("RequestGate", () => {
  it("answers a queued request whose requester may still wait, and drops one that waited longer", async () => {
    let now = 0;
    const stats = newStats();
    const gate = new RequestGate(
      { inFlight: 1, queued: 10, staleMs: 10_000 },
      stats,
      silentLogger,
      () => now,
    );
    const first = request();
    const stale = request();
    const fresh = request();
    expect(gate.admit("api.runs.list", first.answer)).toBe(true);
    expect(gate.admit("api.runs.list", stale.answer)).toBe(true);
    now = 5_000;
    expect(gate.admit("api.runs.list", fresh.answer)).toBe(true);
    // The first takes 11 s: the one queued at 0 s has been given up on, the one at 5 s not yet.
    now = 11_000;
    first.release();
    await settle();
    expect([stale.state.ran, fresh.state.ran]).toEqual([false, true]);
    expect(stats.dropped).toBe(1);
    fresh.release();
  });

  it("keeps every queued request until answered when no staleMs is set", async () => {
    let now = 0;
    const gate = new RequestGate({ inFlight: 1, queued: 10 }, newStats(), silentLogger, () => now);
    const first = request();
    const late = request();
    gate.admit("s", first.answer);
    gate.admit("s", late.answer);
    now = 3_600_000;
    first.release();
    await settle();
    expect(late.state.ran).toBe(true);
    late.release();
  });
});
