import { describe, expect, it } from "vitest";
import { AsyncQueue } from "../../src/bus/async-queue.js";
import { collect } from "../support/wait.js";

describe("AsyncQueue", () => {
  it("hands pushed items to the consumer in order, then ends after draining", async () => {
    const queue = new AsyncQueue<number>();
    queue.push(1);
    const consumed = collect(queue);
    queue.push(2);
    queue.push(3);
    queue.end();
    queue.push(4);
    expect(await consumed).toEqual([1, 2, 3]);
  });

  it("ends at once when the signal aborts, dropping what is buffered, and calls onEnd once", async () => {
    const controller = new AbortController();
    let ended = 0;
    const queue = new AsyncQueue<number>(controller.signal, () => ended++);
    queue.push(1);
    controller.abort();
    queue.end();
    expect(await collect(queue)).toEqual([]);
    expect(ended).toBe(1);
  });

  it("ends when the consumer breaks out of its loop", async () => {
    let ended = false;
    const queue = new AsyncQueue<number>(undefined, () => (ended = true));
    for (let i = 0; i < 5; i++) queue.push(i);
    expect(await collect(queue, 2)).toEqual([0, 1]);
    expect(ended).toBe(true);
  });

  it("fails after what is buffered, and fails a consumer already waiting", async () => {
    const queue = new AsyncQueue<number>();
    queue.push(1);
    queue.fail(new Error("gone"));
    queue.push(2);
    const seen: number[] = [];
    await expect(
      (async () => {
        for await (const item of queue) seen.push(item);
      })(),
    ).rejects.toThrow("gone");
    expect(seen).toEqual([1]);

    const waiting = new AsyncQueue<number>();
    const next = waiting.next();
    waiting.fail(new Error("gone too"));
    await expect(next).rejects.toThrow("gone too");
  });

  it("counts what waits and tells of each item taken", async () => {
    let taken = 0;
    const queue = new AsyncQueue<number>(undefined, undefined, () => taken++);
    queue.push(1);
    queue.push(2);
    expect(queue.size).toBe(2);
    await queue.next();
    expect([queue.size, taken]).toEqual([1, 1]);
    await queue.next();
    const waiting = queue.next();
    queue.push(3);
    expect((await waiting).value).toBe(3);
    expect([queue.size, taken]).toEqual([0, 3]);
  });
});
