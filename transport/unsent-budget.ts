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

/** One holder's place in an {@linkcode UnsentBudget}: what it reported last. */
export class UnsentEntry {
  /** Its last report. */
  bytes = 0;
  readonly #budget: UnsentBudget;
  readonly holder: UnsentHolder;
  #released = false;

  constructor(budget: UnsentBudget, holder: UnsentHolder) {
    this.#budget = budget;
    this.holder = holder;
  }

  /** Reports what the holder holds unsent now (after a send): may shed the largest holders. */
  update(bytes: number): void {
    if (this.#released) return;
    const budget = this.#budget;
    budget.totalBytes += bytes - this.bytes;
    this.bytes = bytes;
    if (budget.totalBytes > budget.maxBytes) budget.rebalance();
  }

  /** The holder ended: it no longer counts. Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#budget.remove(this);
  }
}

/** A budget of unsent bytes shared by the connections of one server. */
export class UnsentBudget {
  /** The most bytes its holders may hold unsent together. */
  readonly maxBytes: number;
  /** The sum of the holders' last reports. */
  totalBytes = 0;
  /** Holders shed so far. */
  shedCount = 0;
  readonly #entries = new Set<UnsentEntry>();
  readonly #onShed: ((bytes: number, totalBytes: number) => void) | undefined;
  #rebalancing = false;

  /** `onShed` hears of each holder shed, with what it held and the total before it went. */
  constructor(maxBytes: number, onShed?: (bytes: number, totalBytes: number) => void) {
    if (!(maxBytes > 0)) throw new RangeError(`an unsent budget must be positive: ${maxBytes}`);
    this.maxBytes = maxBytes;
    this.#onShed = onShed;
  }

  /** Counts `holder` against the budget until its entry is released. */
  track(holder: UnsentHolder): UnsentEntry {
    const entry = new UnsentEntry(this, holder);
    this.#entries.add(entry);
    return entry;
  }

  /** How many holders it counts. */
  get size(): number {
    return this.#entries.size;
  }

  /** @internal Called by a released entry. */
  remove(entry: UnsentEntry): void {
    if (!this.#entries.delete(entry)) return;
    this.totalBytes -= entry.bytes;
    entry.bytes = 0;
  }

  /**
   * @internal The reports add up to more than the budget: reads every holder again, and sheds
   * the largest until the rest fit.
   */
  rebalance(): void {
    // Shedding releases entries, which must not start another pass.
    if (this.#rebalancing) return;
    this.#rebalancing = true;
    try {
      let total = 0;
      for (const entry of this.#entries) {
        entry.bytes = entry.holder.unsentBytes();
        total += entry.bytes;
      }
      this.totalBytes = total;
      if (total <= this.maxBytes) return;
      const largestFirst = [...this.#entries].sort((a, b) => b.bytes - a.bytes);
      for (const entry of largestFirst) {
        if (this.totalBytes <= this.maxBytes) break;
        const { bytes } = entry;
        const before = this.totalBytes;
        entry.release();
        this.shedCount++;
        this.#onShed?.(bytes, before);
        entry.holder.shed();
      }
    } finally {
      this.#rebalancing = false;
    }
  }
}
