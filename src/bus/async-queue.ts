/**
 * A push-to-pull bridge: producers `push`, one consumer iterates. `end()` lets the consumer drain
 * what is buffered, then finishes; an aborted signal or the consumer's `return()` finishes at once
 * (aborting a watch is not an error).
 */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  #items: T[] = [];
  #head = 0;
  #waiter: ((result: IteratorResult<T>) => void) | undefined;
  #ended = false;
  #onEnd: (() => void) | undefined;

  constructor(signal?: AbortSignal, onEnd?: () => void) {
    this.#onEnd = onEnd;
    if (signal?.aborted) this.#stop(true);
    else signal?.addEventListener("abort", () => this.#stop(true), { once: true });
  }

  get ended(): boolean {
    return this.#ended;
  }

  push(item: T): void {
    if (this.#ended) return;
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      waiter({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  end(): void {
    this.#stop(false);
  }

  #stop(dropBuffered: boolean): void {
    if (dropBuffered) {
      this.#items = [];
      this.#head = 0;
    }
    if (this.#ended) return;
    this.#ended = true;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.({ value: undefined, done: true });
    this.#onEnd?.();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head++] as T;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => {
      this.#waiter = resolve;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.#stop(true);
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
