/**
 * One writer per store. A harness claims its store before it reads anything back: the store's
 * holder record (`w/holder`) names the harness that holds it, and its epoch (`w/epoch`), a
 * number raised by every claim, fences the others: each batch the holder writes starts with a
 * {@linkcode CheckOp} on its epoch, so once another harness claimed the store, nothing more of
 * the old holder's is written (SQLite's and Postgres's answer to two writers is a lock; a store
 * any database can hold needs the lock's effect from its one primitive, compare-and-set).
 *
 * A claim is refused while a live harness holds the store ({@linkcode StoreHeldError}, naming
 * it), unless it is a takeover. Whether the holder lives is decided by {@linkcode holderIsLive}
 * alone: a released record is free; one not renewed for `staleAfterMs` is stale; one of this
 * machine whose process is gone (or whose pid now names a later process) is stale.
 *
 * A holder frozen inside a transaction (SIGSTOP, a debugger) still holds SQLite's write lock:
 * POSIX locks last while the process lives, so no claim can write. A claim that finds the store
 * locked ({@linkcode StoreBusyError}) while its holder is stale, on this machine, ends that
 * process ({@linkcode HolderIdentity.stop}, which makes sure the pid still names the process
 * that claimed) and claims again; otherwise it throws {@linkcode StoreLockedError} naming the
 * holder. PostgreSQL ends a frozen holder's transaction itself (the store's
 * `idle_in_transaction_session_timeout`).
 *
 * @module
 */
import type { Clock } from "../../protocol/clock.ts";
import { LocalError } from "../../protocol/errors.ts";
import { then } from "../maybe.ts";
import { keys } from "../records.ts";
import {
  type HarnessStore,
  InvalidStoreRequestError,
  isPromiseLike,
  type MaybePromise,
  StoreBusyError,
  StoreConditionError,
  type StoreOp,
} from "./store.ts";

/** Who a harness is, for its store's holder record: facts of its process. */
export interface HolderIdentity {
  /** The machine's name (`""`: unknown, as in the portable core). */
  readonly host: string;
  /** The process id (0: unknown). */
  readonly pid: number;
  /**
   * When the process started, ms since the epoch: tells a previous process apart that had the
   * same pid on the same machine (a container's pid 1 after a restart).
   */
  readonly processStarted: number;
  /** Whether a process of this machine runs. Absent: unknowable (Workers, the portable core). */
  readonly alive?: (pid: number) => boolean;
  /**
   * Ends (SIGKILL) process `pid` of this machine, if it is the one that started at
   * `processStarted` (ms since the epoch): whether it did. Absent: this runtime cannot.
   */
  readonly stop?: (pid: number, processStarted: number) => boolean;
}

/** The holder record a store keeps (key `w/holder`), for the harness that claimed it last. */
export interface StoreHolderRecord {
  /** The claim's fencing epoch (the value of `w/epoch` it wrote). */
  readonly epoch: number;
  /** The holder's machine (`""`: unknown). */
  readonly host: string;
  /** The holder's process id (0: unknown). */
  readonly pid: number;
  /** When the holder's process started, ms since the epoch. */
  readonly processStarted: number;
  /** When it claimed the store, ms since the epoch. */
  readonly since: number;
  /** When it last said it still holds the store. */
  readonly renewedAt: number;
  /** When it let go of the store (`harness.close()`): free for the next harness at once. */
  readonly releasedAt?: number;
}

/** How often a holder renews its record by default, ms. */
export const DEFAULT_STORE_RENEW_MS = 5_000;

/** The portable core's identity: nothing known, so a holder is judged by its renewals alone. */
export const UNKNOWN_HOLDER: HolderIdentity = {
  host: "",
  pid: 0,
  processStarted: Math.round(globalThis.performance?.timeOrigin ?? 0),
};

/** "host h, pid p, since …, renewed n s ago": a holder as an error names it. */
export function describeHolder(holder: StoreHolderRecord, now: number): string {
  const since = new Date(holder.since).toISOString();
  const ago = Math.max(0, Math.round((now - holder.renewedAt) / 1000));
  return `host ${holder.host || "unknown"}, pid ${holder.pid || "unknown"}, since ${since}, ` +
    `renewed ${ago} s ago`;
}

/**
 * The format of the records this SDK writes, kept in the store (`w/format`) by the first claim.
 * A later SDK that changes how records are kept raises it, so that an older one, which could
 * not read them right, refuses the store ({@linkcode StoreFormatError}) rather than serve a
 * misreading of it.
 */
export const STORE_FORMAT = 1;

/** The store's records are of a format this SDK does not read (a newer SDK's): it refuses it. */
export class StoreFormatError extends LocalError {
  /** The format the store says its records have. */
  readonly format: unknown;
  /** The format found; this SDK reads {@linkcode STORE_FORMAT}. */
  constructor(format: unknown) {
    super(
      `the harness store's records are of format ${JSON.stringify(format)}, and this version ` +
        `reads format ${STORE_FORMAT}: run the version that wrote them, or a newer one`,
    );
    this.name = "StoreFormatError";
    this.format = format;
  }
}

/**
 * Checks the store's format record (`w/format`) before anything is read back: throws (or rejects
 * with) {@linkcode StoreFormatError} for a format this SDK does not read, and writes
 * {@linkcode STORE_FORMAT} into a store that has none. For stores that are not claimed (a
 * `singleWriter` store: a Durable Object's); a claim checks it in its own batch.
 */
export function checkStoreFormat(store: HarnessStore): MaybePromise<void> {
  return then(store.get<unknown>(keys.format), (format) => {
    refuseUnknownFormat(format);
    if (format === undefined) return store.write([{ put: keys.format, value: STORE_FORMAT }]);
  });
}

/** The one rule: a store of another format than {@linkcode STORE_FORMAT} is refused. */
function refuseUnknownFormat(format: unknown): void {
  if (format !== undefined && format !== STORE_FORMAT) throw new StoreFormatError(format);
}

/** A live harness holds the store: this one refuses to start on it. */
export class StoreHeldError extends LocalError {
  /** The harness that holds it. */
  readonly holder: StoreHolderRecord;
  /** The holder's record, as read at `now`. */
  constructor(holder: StoreHolderRecord, now: number) {
    super(
      `the harness store is held by another harness (${describeHolder(holder, now)}): ` +
        "stop that one, or take the store over with takeover: true",
    );
    this.name = "StoreHeldError";
    this.holder = holder;
  }
}

/**
 * The store's database is locked by another connection (SQLite's write lock), and the claim
 * could not end its holder: this harness refuses to start on it.
 */
export class StoreLockedError extends LocalError {
  /** The harness that holds the store, as its record says (absent when there is none). */
  readonly holder: StoreHolderRecord | undefined;
  /** The holder's record as read at `now`, and the driver's error as `cause`. */
  constructor(holder: StoreHolderRecord | undefined, now: number, options?: { cause?: unknown }) {
    super(
      "the store is locked by another harness" +
        (holder ? ` (${describeHolder(holder, now)})` : "") +
        ": stop that one (a harness frozen in a transaction holds the lock until it ends)",
      options,
    );
    this.name = "StoreLockedError";
    this.holder = holder;
  }
}

/** Another harness took the store over: this one's writes are refused from then on. */
export class StoreFencedError extends LocalError {
  /** The harness that holds the store now (absent when its record could not be read). */
  readonly holder: StoreHolderRecord | undefined;
  /** The new holder's record, as read at `now`. */
  constructor(holder: StoreHolderRecord | undefined, now: number) {
    super(
      "another harness took the harness store over" +
        (holder ? ` (${describeHolder(holder, now)})` : "") +
        ": this harness writes nothing more to it",
    );
    this.name = "StoreFencedError";
    this.holder = holder;
  }
}

/**
 * Whether the harness of `holder` still holds its store, seen by `self` at `now`: the one rule
 * every claim applies.
 */
export function holderIsLive(
  holder: StoreHolderRecord,
  self: HolderIdentity,
  now: number,
  staleAfterMs: number,
): boolean {
  if (holder.releasedAt !== undefined) return false;
  if (now - holder.renewedAt > staleAfterMs) return false;
  if (self.host === "" || holder.host !== self.host) return true;
  if (holder.pid === self.pid) {
    // This process, or an earlier one that had its pid: another harness here holds it only if
    // it was made by this very process.
    return holder.processStarted === self.processStarted;
  }
  return holder.pid > 0 ? self.alive?.(holder.pid) ?? true : true;
}

/** Options of a {@linkcode StoreClaim}. */
export interface StoreClaimOptions {
  readonly identity: HolderIdentity;
  readonly clock: Clock;
  /** Claim even while a live harness holds the store: that one is fenced. */
  readonly takeover: boolean;
  /** How often the holder renews its record, ms. */
  readonly renewMs: number;
  /** Told once when another harness took the store over. */
  readonly onFenced: (error: StoreFencedError) => void;
  /** Told when the claim took the store from another holder (a takeover or a stale one). */
  readonly onTaken?: (previous: StoreHolderRecord, live: boolean) => void;
  /** Told when the claim ended a stale holder of this machine that held the database's lock. */
  readonly onStopped?: (previous: StoreHolderRecord) => void;
}

/**
 * A harness's claim on its store: {@linkcode StoreClaim.claim} takes it, {@linkcode
 * StoreClaim.store} is the store whose every batch is fenced by the claim's epoch,
 * {@linkcode StoreClaim.renew} and {@linkcode StoreClaim.release} keep and end it.
 */
export class StoreClaim {
  /** The store, each batch of it checked against this claim's epoch. */
  readonly store: HarnessStore;
  readonly #raw: HarnessStore;
  readonly #options: StoreClaimOptions;
  #record: StoreHolderRecord | undefined;
  #fenced: StoreFencedError | undefined;

  constructor(store: HarnessStore, options: StoreClaimOptions) {
    if (!Number.isSafeInteger(options.renewMs) || options.renewMs <= 0) {
      throw new InvalidStoreRequestError("option", "storeRenewMs must be a positive integer");
    }
    this.#raw = store;
    this.#options = options;
    this.store = {
      get: (key) => store.get(key),
      list: (prefix, list) => store.list(prefix, list),
      write: (batch) => this.#write(batch),
      ...(store.writeGrouped ? { writeGrouped: (batch) => this.#writeGrouped(batch) } : {}),
      ...(store.close ? { close: () => store.close!() } : {}),
    };
  }

  /** The epoch claimed (0 before the claim). */
  get epoch(): number {
    return this.#record?.epoch ?? 0;
  }

  /** Whether another harness took the store over. */
  get fenced(): boolean {
    return this.#fenced !== undefined;
  }

  /**
   * Claims the store: throws (or rejects with) {@linkcode StoreHeldError} while a live harness
   * holds it and this is no takeover.
   */
  claim(): MaybePromise<void> {
    let claimed: MaybePromise<void>;
    try {
      claimed = this.#attempt(3);
    } catch (error) {
      throw this.#locked(error);
    }
    if (!isPromiseLike(claimed)) return claimed;
    return claimed.then(undefined, (error) => {
      throw this.#locked(error);
    });
  }

  /** A read of the claim that found the database locked past its wait names no holder. */
  #locked(error: unknown): unknown {
    if (!(error instanceof StoreBusyError)) return error;
    return new StoreLockedError(undefined, this.#options.clock.now(), { cause: error });
  }

  /** Says the claim still holds (a fenced claim finds out here when it writes nothing else). */
  renew(): MaybePromise<void> {
    const record = this.#record;
    if (!record || this.#fenced) return;
    const next = { ...record, renewedAt: this.#options.clock.now() };
    return then(this.#write([{ put: keys.holder, value: next }]), () => void (this.#record = next));
  }

  /** Lets go of the store: the next harness claims it at once. */
  release(): MaybePromise<void> {
    const record = this.#record;
    if (!record || this.#fenced) return;
    const now = this.#options.clock.now();
    return this.#write([{
      put: keys.holder,
      value: { ...record, renewedAt: now, releasedAt: now },
    }]);
  }

  #attempt(left: number): MaybePromise<void> {
    const { clock, identity, takeover, renewMs } = this.#options;
    const raw = this.#raw;
    return then(
      raw.get<number>(keys.epoch),
      (epoch) =>
        then(
          raw.get<StoreHolderRecord>(keys.holder),
          (holder) =>
            then(raw.get<unknown>(keys.format), (format) => {
              refuseUnknownFormat(format);
              const now = clock.now();
              const live = holder !== undefined && holderIsLive(holder, identity, now, renewMs * 3);
              if (live && !takeover) throw new StoreHeldError(holder!, now);
              const record: StoreHolderRecord = {
                epoch: (epoch ?? 0) + 1,
                host: identity.host,
                pid: identity.pid,
                processStarted: identity.processStarted,
                since: now,
                renewedAt: now,
              };
              const batch: StoreOp[] = [
                epoch === undefined ? { check: keys.epoch } : { check: keys.epoch, value: epoch },
                { put: keys.epoch, value: record.epoch },
                { put: keys.holder, value: record },
              ];
              // A store of before the format record was kept has the first format's records.
              if (format === undefined) batch.push({ put: keys.format, value: STORE_FORMAT });
              const claimed = () => {
                this.#record = record;
                if (holder && holder.releasedAt === undefined) {
                  this.#options.onTaken?.(holder, live);
                }
              };
              let written: MaybePromise<void>;
              try {
                written = raw.write(batch);
              } catch (error) {
                return this.#contended(error, left, holder);
              }
              if (!isPromiseLike(written)) {
                return claimed();
              }
              return written.then(claimed, (error) => this.#contended(error, left, holder));
            }),
        ),
    );
  }

  /**
   * Another harness claimed between the read and the write: decide again on what it wrote. The
   * database is locked: a stale holder of this machine frozen in a transaction is ended, then
   * the claim tries again; else {@linkcode StoreLockedError}.
   */
  #contended(
    error: unknown,
    left: number,
    holder: StoreHolderRecord | undefined,
  ): MaybePromise<void> {
    if (error instanceof StoreBusyError) {
      if (left > 1 && holder !== undefined && this.#stopStale(holder)) {
        return this.#attempt(left - 1);
      }
      throw new StoreLockedError(holder, this.#options.clock.now(), { cause: error });
    }
    if (!(error instanceof StoreConditionError) || left <= 1) throw error;
    return this.#attempt(left - 1);
  }

  /**
   * Ends `holder`'s process when it is stale (not renewed for three renewals, not released),
   * of this machine, another process, and still the one that claimed: whether it did.
   */
  #stopStale(holder: StoreHolderRecord): boolean {
    const { identity, clock, renewMs } = this.#options;
    if (holder.releasedAt !== undefined) return false;
    if (clock.now() - holder.renewedAt <= renewMs * 3) return false;
    if (identity.host === "" || holder.host !== identity.host) return false;
    if (holder.pid <= 0 || holder.pid === identity.pid || !identity.stop) return false;
    if (!identity.stop(holder.pid, holder.processStarted)) return false;
    this.#options.onStopped?.(holder);
    return true;
  }

  #write(batch: readonly StoreOp[]): MaybePromise<void> {
    if (this.#fenced) throw this.#fenced;
    const fenced = [{ check: keys.epoch, value: this.epoch }, ...batch];
    let written: MaybePromise<void>;
    try {
      written = this.#raw.write(fenced);
    } catch (error) {
      return this.#failed(error);
    }
    if (!isPromiseLike(written)) return written;
    return written.then(undefined, (error) => this.#failed(error));
  }

  #writeGrouped(batch: readonly StoreOp[]): Promise<void> {
    if (this.#fenced) throw this.#fenced;
    const fenced = [{ check: keys.epoch, value: this.epoch }, ...batch];
    let written: Promise<void>;
    try {
      written = this.#raw.writeGrouped!(fenced);
    } catch (error) {
      return this.#failed(error);
    }
    return written.then(undefined, (error) => this.#failed(error));
  }

  /** A failed write: a failed epoch check means another harness holds the store now. */
  #failed(error: unknown): never | Promise<never> {
    if (!(error instanceof StoreConditionError) || error.key !== keys.epoch) throw error;
    if (this.#fenced) throw this.#fenced;
    const fence = (holder: StoreHolderRecord | undefined): never => {
      if (!this.#fenced) {
        this.#fenced = new StoreFencedError(holder, this.#options.clock.now());
        this.#options.onFenced(this.#fenced);
      }
      throw this.#fenced;
    };
    let holder: MaybePromise<StoreHolderRecord | undefined>;
    try {
      holder = this.#raw.get<StoreHolderRecord>(keys.holder);
    } catch {
      return fence(undefined);
    }
    if (!isPromiseLike(holder)) return fence(holder);
    return holder.then(fence, () => fence(undefined));
  }
}
