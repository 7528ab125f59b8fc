/** An unbounded async queue read with `for await`: turn inputs, subscriber streams. */

/** A queue that is also its own async iterator. `end()` lets readers finish after the rest. */
export class AsyncQueue<T> implements AsyncIterableIterator<T> {
  #items: T[] = [];
  #head = 0;
  #waiters: ((result: IteratorResult<T>) => void)[] = [];
  #ended = false;

  /** Items waiting to be read. */
  get size(): number {
    return this.#items.length - this.#head;
  }

  /** Whether `end()` was called. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Adds an item; false (dropped) once ended. */
  push(item: T): boolean {
    if (this.#ended) return false;
    const waiter = this.#waiters.shift();
    if (waiter) waiter({ value: item, done: false });
    else this.#items.push(item);
    return true;
  }

  /** Takes every waiting item at once. */
  drain(): T[] {
    const out = this.#items.slice(this.#head);
    this.#items = [];
    this.#head = 0;
    return out;
  }

  /** No more items: readers finish once they have the rest. Idempotent. */
  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    for (const waiter of this.#waiters.splice(0)) waiter({ value: undefined, done: true });
  }

  next(): Promise<IteratorResult<T>> {
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head++];
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head);
        this.#head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.#ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** A reader that stops early ends the queue (nobody else reads a subscriber stream). */
  return(): Promise<IteratorResult<T>> {
    this.end();
    this.#items = [];
    this.#head = 0;
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}
