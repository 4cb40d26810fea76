import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/model/circuit-breaker.js";
import { costOf } from "../../src/model/pricing.js";
import { backoffDelay, DEFAULT_RETRY, isRetryableStatus, parseRetryAfter } from "../../src/model/retry.js";
import { ToolCallAssembler } from "../../src/model/tool-call-assembler.js";

describe("ToolCallAssembler", () => {
  it("joins argument fragments of interleaved calls by index", () => {
    const a = new ToolCallAssembler();
    a.add({ index: 0, id: "c1", function: { name: "grep", arguments: "" } });
    a.add({ index: 1, id: "c2", function: { name: "read_file", arguments: '{"pa' } });
    a.add({ index: 0, function: { arguments: '{"pattern":' } });
    a.add({ index: 1, function: { arguments: 'th":"x"}' } });
    a.add({ index: 0, function: { arguments: '"TODO"}' } });
    expect(a.calls()).toEqual([
      { id: "c1", type: "function", function: { name: "grep", arguments: '{"pattern":"TODO"}' } },
      { id: "c2", type: "function", function: { name: "read_file", arguments: '{"path":"x"}' } },
    ]);
  });

  it("starts a new call on a new id when the server omits index", () => {
    const a = new ToolCallAssembler();
    a.add({ id: "c1", function: { name: "a", arguments: '{"x":' } });
    a.add({ function: { arguments: "1}" } });
    a.add({ id: "c2", function: { name: "b", arguments: "{}" } });
    expect(a.calls().map((c) => [c.id, c.function.name, c.function.arguments])).toEqual([
      ["c1", "a", '{"x":1}'],
      ["c2", "b", "{}"],
    ]);
  });

  it("keeps calls apart that a server sends at one index with different ids, and takes arguments sent as an object", () => {
    const a = new ToolCallAssembler();
    a.add({ index: 0, id: "c1", function: { name: "read_file", arguments: '{"path":' } });
    a.add({ index: 0, function: { arguments: '"a"}' } });
    a.add({ index: 0, id: "c2", function: { name: "list_dir", arguments: { path: "." } } });
    expect(a.calls()).toEqual([
      { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a"}' } },
      { id: "c2", type: "function", function: { name: "list_dir", arguments: '{"path":"."}' } },
    ]);
  });

  it("gives calls without an id one of their own, unlike any other's, and {} to empty arguments", () => {
    const ids = new Set<string>();
    for (let turn = 0; turn < 50; turn++) {
      const a = new ToolCallAssembler();
      a.add({ index: 0, function: { name: "list_dir" } });
      a.add({ index: 1, function: { name: "list_dir" } });
      const calls = a.calls();
      expect(calls[0]).toMatchObject({ type: "function", function: { name: "list_dir", arguments: "{}" } });
      expect(a.calls().map((c) => c.id)).toEqual(calls.map((c) => c.id));
      for (const call of calls) ids.add(call.id);
    }
    expect(ids.size).toBe(100);
    for (const id of ids) expect(id).toMatch(/^call_[A-Za-z0-9_-]{16}$/);
  });
});

describe("retry timing", () => {
  it("backs off exponentially with jitter within its ceiling", () => {
    const policy = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1000 };
    expect(backoffDelay(policy, 1, undefined, () => 0)).toBe(50);
    expect(backoffDelay(policy, 1, undefined, () => 1)).toBe(100);
    expect(backoffDelay(policy, 3, undefined, () => 1)).toBe(400);
    expect(backoffDelay(policy, 10, undefined, () => 1)).toBe(1000);
  });

  it("prefers Retry-After, capped", () => {
    const policy = { ...DEFAULT_RETRY, maxRetryAfterMs: 5000 };
    expect(backoffDelay(policy, 1, 2000)).toBe(2000);
    expect(backoffDelay(policy, 1, 90_000)).toBe(5000);
  });

  it("reads Retry-After as seconds, as a date, or retry-after-ms", () => {
    const h = (values: Record<string, string>) => new Headers(values);
    expect(parseRetryAfter(h({ "retry-after": "3" }))).toBe(3000);
    expect(parseRetryAfter(h({ "retry-after-ms": "250", "retry-after": "3" }))).toBe(250);
    expect(parseRetryAfter(h({ "retry-after": new Date(10_000).toUTCString() }), 4000)).toBe(6000);
    expect(parseRetryAfter(h({ "retry-after": "soon" }))).toBeUndefined();
    expect(parseRetryAfter(h({}))).toBeUndefined();
  });

  it.each([
    [429, true],
    [500, true],
    [503, true],
    [408, true],
    [400, false],
    [401, false],
    [404, false],
    [undefined, true],
  ])("status %s is retryable: %s", (status, expected) => {
    expect(isRetryableStatus(status)).toBe(expected);
  });
});

describe("CircuitBreaker", () => {
  it("opens after the threshold, lets one probe through after the cool-down, and closes on success", () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failureThreshold: 3, coolDownMs: 100, now: () => now });
    breaker.failure();
    breaker.failure();
    expect(breaker.tryAcquire()).toBe(true);
    breaker.failure();
    expect(breaker.state).toBe("open");
    expect(breaker.tryAcquire()).toBe(false);
    now = 100;
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    breaker.success();
    expect(breaker.state).toBe("closed");
  });

  it("reopens when the probe fails", () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failureThreshold: 1, coolDownMs: 100, now: () => now });
    breaker.failure();
    now = 150;
    expect(breaker.tryAcquire()).toBe(true);
    breaker.failure();
    expect(breaker.state).toBe("open");
    now = 200;
    expect(breaker.tryAcquire()).toBe(false);
  });
});

describe("costOf", () => {
  it("prices input, cached input and output per million tokens", () => {
    const prices = { inputPerMTok: 2, outputPerMTok: 8, cachedInputPerMTok: 0.5 };
    expect(
      costOf({ inputTokens: 1_000_000, outputTokens: 500_000, cachedInputTokens: 400_000 }, prices),
    ).toBeCloseTo(1.2 + 0.2 + 4);
    expect(costOf({ inputTokens: 10, outputTokens: 10, cachedInputTokens: 0 }, undefined)).toBe(0);
  });
});
