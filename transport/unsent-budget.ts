/**
 * A total bound on the bytes a server holds unsent across all its connections. Each connection
 * is bounded on its own (a `Peer`'s `maxQueuedBytes`, a stream's queue), but fifty clients that
 * stop reading, each within its own 64 MiB, took a harness from 120 MiB to 1.9 GiB: past the
 * total, the connections that hold the most are shed (ended at once, what they hold discarded)
 * until the total is within the budget again.
 *
 * The cost on the hot path is a counter update per send: each connection reports what it holds
 * after a send, and the budget keeps the sum of the last reports. A connection that drained since
 * its last send is counted at its last report until the sum crosses the budget; only then are all
 * of them read again (one pass), and shed only if the fresh sum is still over.
 *
 * Portable: no runtime APIs.
 */

/** A connection (or stream) counted against an {@linkcode UnsentBudget}. */
export interface UnsentHolder {
  /** The bytes it holds unsent now. */
  unsentBytes(): number;
  /** Ends it at once, discarding what it holds: it takes too large a part of the budget. */
  shed(): void;
}

/** One holder's place in an {@linkcode UnsentBudget} (see {@linkcode UnsentBudget.track}). */
export class UnsentEntry {
  /** The holder it counts. */
  readonly holder: UnsentHolder;
  readonly #budget: UnsentBudget;
  #bytes = 0;
  #released = false;

  /** An entry of `holder` in `budget` (made by {@linkcode UnsentBudget.track}). */
  constructor(budget: UnsentBudget, holder: UnsentHolder) {
    this.#budget = budget;
    this.holder = holder;
  }

  /** What the holder reported last (0 once released). */
  get bytes(): number {
    return this.#bytes;
  }

  /** Whether it no longer counts (released, or shed). */
  get released(): boolean {
    return this.#released;
  }

  /** Reports what the holder holds unsent now (after a send): may shed the largest holders. */
  update(bytes: number): void {
    if (this.#released) return;
    const delta = bytes - this.#bytes;
    this.#bytes = bytes;
    this.#budget.add(delta);
  }

  /** The holder ended: it no longer counts. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    const bytes = this.#bytes;
    this.#bytes = 0;
    this.#budget.forget(this, bytes);
  }

  /** Reads the holder again (a rebalance): returns what it holds now. */
  measure(): number {
    if (!this.#released) this.#bytes = this.holder.unsentBytes();
    return this.#bytes;
  }
}

/** A budget of unsent bytes shared by the connections (or streams) of one server. */
export class UnsentBudget {
  /** The most bytes its holders may hold unsent together. */
  readonly maxBytes: number;
  #totalBytes = 0;
  #shed = 0;
  readonly #entries = new Set<UnsentEntry>();
  #rebalancing = false;

  /** A budget of `maxBytes` (positive). */
  constructor(maxBytes: number) {
    if (!(maxBytes > 0)) throw new RangeError(`an unsent budget must be positive: ${maxBytes}`);
    this.maxBytes = maxBytes;
  }

  /** The sum of the holders' last reports. */
  get totalBytes(): number {
    return this.#totalBytes;
  }

  /** How many holders it has shed. */
  get shedCount(): number {
    return this.#shed;
  }

  /** How many holders it counts. */
  get size(): number {
    return this.#entries.size;
  }

  /** Counts `holder` against the budget until its entry is released. */
  track(holder: UnsentHolder): UnsentEntry {
    const entry = new UnsentEntry(this, holder);
    this.#entries.add(entry);
    return entry;
  }

  /** Adds an entry's change to the total (its `update`); over the budget, rebalances. */
  add(delta: number): void {
    this.#totalBytes += delta;
    if (this.#totalBytes > this.maxBytes) this.rebalance();
  }

  /** Takes a released entry's last report off the total (its `release`). */
  forget(entry: UnsentEntry, bytes: number): void {
    if (this.#entries.delete(entry)) this.#totalBytes -= bytes;
  }

  /**
   * Reads every holder again (some drained since their last report) and, while the total is
   * still over the budget, sheds the one that holds the most.
   */
  rebalance(): void {
    // Shedding releases entries, which must not start another pass.
    if (this.#rebalancing) return;
    this.#rebalancing = true;
    try {
      let total = 0;
      for (const entry of this.#entries) total += entry.measure();
      this.#totalBytes = total;
      if (total <= this.maxBytes) return;
      const largestFirst = [...this.#entries].sort((a, b) => b.bytes - a.bytes);
      for (const entry of largestFirst) {
        if (this.#totalBytes <= this.maxBytes) break;
        entry.release();
        this.#shed++;
        entry.holder.shed();
      }
    } finally {
      this.#rebalancing = false;
    }
  }
}
