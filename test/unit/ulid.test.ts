import { describe, expect, it } from "vitest";
import { ulid } from "../../src/util/ulid.js";

const CROCKFORD = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** The millisecond time in an id's first ten characters. */
function timeOf(id: string): number {
  let time = 0;
  for (const char of id.slice(0, 10)) time = time * 32 + "0123456789ABCDEFGHJKMNPQRSTVWXYZ".indexOf(char);
  return time;
}

describe("ulid", () => {
  it("is 26 Crockford base32 characters carrying the millisecond it was made in", () => {
    const now = Date.UTC(2026, 10, 30, 6, 0, 0, 123);
    const id = ulid(now);
    expect(id).toMatch(CROCKFORD);
    expect(timeOf(id)).toBe(now);
  });

  it("sorts in the order made, also within one millisecond, and never repeats", () => {
    const now = Date.now() + 60_000;
    const ids = Array.from({ length: 10_000 }, (_, i) => ulid(now + Math.floor(i / 1000)));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    // A clock that steps back does not make an id sort before the last one.
    const after = ulid(now - 5000);
    expect(after > (ids.at(-1) as string)).toBe(true);
  });

  it("draws fresh randomness for each new millisecond", () => {
    const base = Date.now() + 120_000;
    const randoms = Array.from({ length: 200 }, (_, i) => ulid(base + i).slice(10));
    expect(new Set(randoms).size).toBe(200);
  });
});
