/**
 * A set that remembers only its most recent members: what the harness and the executor use to
 * recognize repeated ids (tool calls, JSON-RPC ids, event ids) in bounded memory.
 *
 * The order of members is kept in a ring of keys. Evicting with `set.values().next()` instead
 * costs time in proportion to the set's size once it is full: V8 keeps deleted slots at the
 * front of a Set until it rehashes, and every `next()` walks over them — at the sizes the
 * harness and the executor keep, more than the rest of a tool call.
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

/**
 * Remembers at least the `limit` most recent ids, in two generations like {@linkcode RecentMap}.
 *
 * Most ids looked up are new (a fresh tool call, a fresh event), and a miss walks both
 * generations' hash tables, each up to `limit` entries: in a busy executor those are cold in
 * the cache, and the lookups of a tool call's id were a large share of its CPU. String ids first pass
 * a Bloom filter per generation (16 bits per id, two probes, ~1.4% false positives), which
 * answers almost every miss from a few kilobytes without touching the tables.
 */
export class RecentIds<T> {
  /** The fewest most recent members remembered. */
  readonly limit: number;
  #young = new Set<T>();
  #old: Set<T> | undefined;
  /** The young generation's filter, grown with it (none before its first string id). */
  #youngFilter: IdFilter | undefined;
  #oldFilter: IdFilter | undefined;

  constructor(limit: number) {
    this.limit = Math.max(1, Math.floor(limit));
  }

  /** Whether `key` is remembered. */
  has(key: T): boolean {
    if (typeof key === "string") {
      const hash = hashId(key);
      if (!this.#youngFilter?.mayHave(hash) && !this.#oldFilter?.mayHave(hash)) return false;
    }
    return this.#young.has(key) || this.#old?.has(key) === true;
  }

  /** Remembers `key` as the most recent. */
  add(key: T): void {
    if (this.#young.size >= this.limit) {
      this.#old = this.#young;
      this.#oldFilter = this.#youngFilter;
      this.#young = new Set();
      this.#youngFilter = undefined;
    }
    // A key of the old generation is added to the young one too: it is the most recent now.
    const young = this.#young;
    const before = young.size;
    young.add(key);
    if (typeof key !== "string" || young.size === before) return;
    let filter = this.#youngFilter;
    if (!filter || filter.full(young.size)) filter = this.#youngFilter = IdFilter.of(young);
    else filter.mark(hashId(key));
  }

  /** Forgets `key`; whether it was remembered. */
  delete(key: T): boolean {
    // The filters keep its bits: a false positive more, answered by the tables.
    const young = this.#young.delete(key);
    return this.#old?.delete(key) === true || young;
  }
}

/** FNV-1a of a string's UTF-16 code units. */
function hashId(id: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) hash = Math.imul(hash ^ id.charCodeAt(i), 0x01000193);
  return hash;
}

/** A Bloom filter of string ids: two probes, sized for 16 bits per id. */
class IdFilter {
  readonly #words: Int32Array;
  readonly #mask: number;

  /** A filter of every string id of `ids`, sized for twice as many. */
  static of<T>(ids: Set<T>): IdFilter {
    let bits = 1024;
    while (bits < ids.size * 32) bits *= 2;
    const filter = new IdFilter(bits);
    for (const id of ids) if (typeof id === "string") filter.mark(hashId(id));
    return filter;
  }

  private constructor(bits: number) {
    this.#words = new Int32Array(bits >>> 5);
    this.#mask = bits - 1;
  }

  /** Whether `count` ids are more than it was sized for. */
  full(count: number): boolean {
    return count * 16 > this.#mask + 1;
  }

  mark(hash: number): void {
    const a = hash & this.#mask;
    const b = second(hash) & this.#mask;
    this.#words[a >>> 5] |= 1 << (a & 31);
    this.#words[b >>> 5] |= 1 << (b & 31);
  }

  mayHave(hash: number): boolean {
    const a = hash & this.#mask;
    if ((this.#words[a >>> 5] & (1 << (a & 31))) === 0) return false;
    const b = second(hash) & this.#mask;
    return (this.#words[b >>> 5] & (1 << (b & 31))) !== 0;
  }
}

/** A second, independent-enough probe from the same hash (a multiply-xorshift mix). */
function second(hash: number): number {
  const mixed = Math.imul(hash ^ (hash >>> 16), 0x85ebca6b);
  return mixed ^ (mixed >>> 13);
}
