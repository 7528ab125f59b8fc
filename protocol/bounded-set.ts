/**
 * A set that remembers only its most recent members: what the harness and the executor use to
 * recognize repeated ids (tool calls, JSON-RPC ids, event ids) in bounded memory.
 *
 * The order of members is kept in a ring of keys. Evicting with `set.values().next()` instead
 * costs time in proportion to the set's size once it is full: V8 keeps deleted slots at the
 * front of a Set until it rehashes, and every `next()` walks over them (about 10 µs per add at
 * 10,000 members, 40 µs at 50,000 — more than the rest of a tool call).
 *
 * @module
 */

/** A set of at most `limit` members: adding one more evicts the oldest. */
export class BoundedSet<T> {
  /** The most members kept. */
  readonly limit: number;
  readonly #members = new Set<T>();
  /** Keys in the order they were added; once full, `#next` is the oldest. */
  readonly #ring: T[] = [];
  #next = 0;

  constructor(limit: number) {
    this.limit = Math.max(1, Math.floor(limit));
  }

  /** How many members it holds. */
  get size(): number {
    return this.#members.size;
  }

  /** Whether `key` is a member. */
  has(key: T): boolean {
    return this.#members.has(key);
  }

  /**
   * Adds `key` (a member already is left where it is); returns the member evicted to make
   * room, if one was.
   */
  add(key: T): T | undefined {
    if (this.#members.has(key)) return undefined;
    this.#members.add(key);
    if (this.#ring.length < this.limit) {
      this.#ring.push(key);
      return undefined;
    }
    const evicted = this.#ring[this.#next];
    this.#ring[this.#next] = key;
    this.#next = (this.#next + 1) % this.limit;
    // A key deleted and added again sits in the ring twice: its older slot may evict it early.
    return this.#members.delete(evicted) ? evicted : undefined;
  }

  /** Removes `key`; whether it was a member. */
  delete(key: T): boolean {
    return this.#members.delete(key);
  }
}

/**
 * Remembers at least the `limit` most recently set entries, in two generations of up to `limit`
 * each: when the young one fills, it becomes the old one and the old one is dropped whole.
 * Unlike {@linkcode BoundedSet} nothing is deleted one at a time, so a table that turns over on
 * every tool call (add one, evict one) costs no hash-table churn: the cheaper choice where up to
 * twice `limit` entries may be held.
 */
export class RecentMap<K, V> {
  /** The fewest most recent entries remembered. */
  readonly limit: number;
  #young = new Map<K, V>();
  #old: Map<K, V> | undefined;

  constructor(limit: number) {
    this.limit = Math.max(1, Math.floor(limit));
  }

  /** The value remembered for `key`. */
  get(key: K): V | undefined {
    return this.#young.get(key) ?? this.#old?.get(key);
  }

  /** Whether `key` is remembered. */
  has(key: K): boolean {
    return this.#young.has(key) || this.#old?.has(key) === true;
  }

  /** Remembers `key` with `value` as the most recent. */
  set(key: K, value: V): void {
    if (this.#young.size >= this.limit) {
      this.#old = this.#young;
      this.#young = new Map();
    }
    this.#young.set(key, value);
  }

  /** Forgets `key`; whether it was remembered. */
  delete(key: K): boolean {
    const young = this.#young.delete(key);
    return this.#old?.delete(key) === true || young;
  }
}

/** Remembers at least the `limit` most recent ids: a {@linkcode RecentMap} of ids alone. */
export class RecentIds<T> {
  readonly #ids: RecentMap<T, true>;

  constructor(limit: number) {
    this.#ids = new RecentMap(limit);
  }

  /** The fewest most recent members remembered. */
  get limit(): number {
    return this.#ids.limit;
  }

  /** Whether `key` is remembered. */
  has(key: T): boolean {
    return this.#ids.has(key);
  }

  /** Remembers `key` as the most recent. */
  add(key: T): void {
    if (!this.#ids.has(key)) this.#ids.set(key, true);
  }

  /** Forgets `key`; whether it was remembered. */
  delete(key: T): boolean {
    return this.#ids.delete(key);
  }
}
