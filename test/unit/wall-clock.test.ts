import { describe, expect, it } from "vitest";
import { type Clock, WallClock, type WallMoment } from "../../src/actors/wall-clock.js";

/** A clock moved by hand: its timers fire as it passes them. */
function handClock() {
  let now = 0;
  let timers: Array<{ at: number; fn: () => void }> = [];
  const clock: Clock = {
    now: () => now,
    after: (ms, fn) => {
      const timer = { at: now + ms, fn };
      timers.push(timer);
      return () => {
        timers = timers.filter((t) => t !== timer);
      };
    },
  };
  const pass = (ms: number) => {
    now += ms;
    const due = timers.filter((t) => t.at <= now);
    timers = timers.filter((t) => t.at > now);
    for (const t of due) t.fn();
  };
  return { clock, pass };
}

function wall(maxWallMs: number | undefined, before = { workedMs: 0, waitedMs: 0 }) {
  const { clock, pass } = handClock();
  const told: WallMoment[] = [];
  return { wall: new WallClock(maxWallMs, before, (m) => told.push(m), clock), pass, told };
}

describe("the wall clock", () => {
  it("reaches the wall at maxWallMs and passes it after a grace of a tenth", () => {
    const { wall: clock, pass, told } = wall(1000);
    clock.work();
    pass(999);
    expect(told).toEqual([]);
    pass(1);
    expect(told).toEqual(["WALL_REACHED"]);
    pass(99);
    expect(told).toEqual(["WALL_REACHED"]);
    pass(1);
    expect(told).toEqual(["WALL_REACHED", "WALL_PASSED"]);
  });

  it("grants at most 5 s of grace", () => {
    const { wall: clock, pass, told } = wall(60_000);
    clock.work();
    pass(60_000 + 4999);
    expect(told).toEqual(["WALL_REACHED"]);
    pass(1);
    expect(told).toEqual(["WALL_REACHED", "WALL_PASSED"]);
  });

  it("stands still while a person is waited for, and says how long the wait took", () => {
    const { wall: clock, pass, told } = wall(1000);
    clock.work();
    pass(600);
    clock.wait();
    pass(10_000);
    expect(told).toEqual([]);
    expect(clock.workedMs()).toBe(600);
    expect(clock.waitedMs()).toBe(10_000);
    expect(clock.work()).toBe(10_000);
    pass(399);
    expect(told).toEqual([]);
    pass(1);
    expect(told).toEqual(["WALL_REACHED"]);
    expect(clock.workedMs()).toBe(1000);
  });

  it("goes on from what a resumed agent had worked and waited", () => {
    const { wall: clock, pass, told } = wall(1000, { workedMs: 900, waitedMs: 5000 });
    clock.wait();
    pass(2000);
    expect(clock.waitedMs()).toBe(7000);
    clock.work();
    pass(100);
    expect(told).toEqual(["WALL_REACHED"]);
  });

  it("never tells anything once stopped, nor without a limit", () => {
    const stopped = wall(1000);
    stopped.wall.work();
    stopped.wall.stop();
    stopped.pass(5000);
    expect(stopped.told).toEqual([]);
    const unlimited = wall(undefined);
    unlimited.wall.work();
    unlimited.pass(10 ** 9);
    expect(unlimited.told).toEqual([]);
  });
});
