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
});
