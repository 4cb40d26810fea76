interface Waiter<T> {
  resolve: (result: IteratorResult<T>) => void;
  reject: (error: Error) => void;
}

/**
 * A push-to-pull bridge: producers `push`, one consumer iterates. `end()` lets the consumer drain
 * what is buffered, then finishes; `fail(error)` does too, then throws the error; an aborted signal
 * or the consumer's `return()` finishes at once (aborting a watch is not an error). `onTake` hears of
 * every item the consumer takes, for a producer that holds back while much is buffered.
 */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  #items: T[] = [];
  #head = 0;
  #waiter: Waiter<T> | undefined;
  #ended = false;
  #failure: Error | undefined;
  #onEnd: (() => void) | undefined;
  #onTake: (() => void) | undefined;

  constructor(signal?: AbortSignal, onEnd?: () => void, onTake?: () => void) {
    this.#onEnd = onEnd;
    this.#onTake = onTake;
    if (signal?.aborted) this.#stop(true);
    else signal?.addEventListener("abort", () => this.#stop(true), { once: true });
  }

  get ended(): boolean {
    return this.#ended;
  }

  /** Items pushed and not yet taken. */
  get size(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    if (this.#ended) return;
    const waiter = this.#waiter;
    if (waiter) {
      this.#waiter = undefined;
      this.#onTake?.();
      waiter.resolve({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  end(): void {
    this.#stop(false);
  }

  /** Ends after what is buffered; the consumer's `next()` after that throws `error`. */
  fail(error: Error): void {
    if (this.#ended) return;
    this.#failure = error;
    this.#stop(false);
  }

  #stop(dropBuffered: boolean): void {
    if (dropBuffered) {
      this.#items = [];
      this.#head = 0;
      this.#failure = undefined;
    }
    if (this.#ended) return;
    this.#ended = true;
    const waiter = this.#waiter;
    this.#waiter = undefined;
    if (waiter && this.#failure) {
      waiter.reject(this.#failure);
      this.#failure = undefined;
    } else waiter?.resolve({ value: undefined, done: true });
    this.#onEnd?.();
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head++] as T;
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      this.#onTake?.();
      return Promise.resolve({ value, done: false });
    }
    if (this.#ended) {
      const failure = this.#failure;
      this.#failure = undefined;
      return failure ? Promise.reject(failure) : Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.#waiter = { resolve, reject };
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
