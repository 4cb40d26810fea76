import { describe, expect, it } from "vitest";
import { subjectMatches, subjects } from "../../src/bus/subjects.js";

describe("subjects", () => {
  const s = subjects("troupe");

  it("builds every subject from the prefix", () => {
    expect(s.event("r1", "a1", "state.changed")).toBe("troupe.evt.r1.a1.state.changed");
    expect(s.events()).toBe("troupe.evt.>");
    expect(s.events("r1")).toBe("troupe.evt.r1.>");
    expect(s.control("r1", "a1", "steer")).toBe("troupe.ctl.r1.a1.steer");
    expect(s.api("runs.start")).toBe("troupe.api.runs.start");
    expect(s.approval("r1", "call_1")).toBe("troupe.approval.r1.call_1");
    expect(s.workSpawn()).toBe("troupe.work.spawn");
    expect(s.eventStream).toBe("TROUPE_EVENTS");
    expect(s.bucket("snapshots")).toBe("troupe_snapshots");
    expect(subjects("team-a").eventStream).toBe("TEAM_A_EVENTS");
  });

  it("refuses prefixes and tokens that are not single subject tokens", () => {
    expect(() => subjects("a.b")).toThrow(/prefix/);
    expect(() => subjects("1abc")).toThrow(/prefix/);
    expect(() => s.approval("r1", "c 1")).toThrow(/call id/);
    expect(() => s.event("r1", "a1", "bad..type")).toThrow(/event type/);
    expect(() => s.bucket("a.b")).toThrow(/bucket/);
  });

  it.each([
    ["a.b.c", "a.b.c", true],
    ["a.*.c", "a.b.c", true],
    ["a.*", "a.b.c", false],
    ["a.>", "a.b.c", true],
    ["a.>", "a", false],
    ["a.b.c.d", "a.b.c", false],
    ["*.*.*", "a.b.c", true],
    [">", "a", true],
    ["a.b", "a.b.c", false],
    ["ab.c", "a.c", false],
    ["a.c", "ab.c", false],
    ["a.bc", "a.b", false],
    ["a.*.c", "a.bb.c", true],
    ["a.*.c", "a.b.cd", false],
    ["a.b.>", "a.b", false],
    ["a.b.>", "a.b.c.d.e", true],
    ["*", "a.b", false],
  ])("%s matches %s: %s", (pattern, subject, expected) => {
    expect(subjectMatches(pattern, subject)).toBe(expected);
  });
});
