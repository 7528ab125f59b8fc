/**
 * A harness's tenure of its store: claiming it at start (or standing by until its holder is
 * gone), renewing the claim while the harness runs, learning that another harness took it over,
 * and letting go at close. The harness core holds one and asks it only what it decides on: whether
 * it stands by, whether it took the store from a holder that stopped renewing, and the store whose
 * every batch is fenced by the claim.
 *
 * @module
 */
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import { HarnessClosedError } from "./errors.ts";
import { CallbackDeadline, type Scheduler } from "./scheduler.ts";
import {
  describeHolder,
  type HolderIdentity,
  StoreClaim,
  type StoreFencedError,
  StoreFormatError,
  StoreHeldError,
} from "./store/claim.ts";
import {
  type HarnessStore,
  InvalidStoreRequestError,
  isPromiseLike,
  type MaybePromise,
  StoreClosedError,
} from "./store/store.ts";

/** What a {@linkcode StoreTenure} needs. */
export interface StoreTenureOptions {
  readonly identity: HolderIdentity;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly scheduler: Scheduler;
  /** Claim even from a live holder (it is fenced). */
  readonly takeover: boolean;
  /** While another live harness holds the store, wait for it instead of failing. */
  readonly standby: boolean;
  /** How often the claim is renewed, ms (a holder silent for three of them is gone). */
  readonly renewMs: number;
  /** Told once another harness took the store over. */
  readonly onFenced: (error: StoreFencedError) => void;
  /** Told how each renewal's write came out: `failed` with its error, or not. */
  readonly onRenewed?: (failed: boolean, error?: unknown) => void;
}

/** A harness's claim on its store, from its start to its close. */
export class StoreTenure {
  /** The store, each batch of it checked against the claim's epoch. */
  readonly store: HarnessStore;
  readonly #claim: StoreClaim;
  readonly #options: StoreTenureOptions;
  #standingBy = false;
  #tookOver = false;
  #heldLogged = false;
  #ended = false;
  /** Ends a standby: the harness was closed while it waited. */
  #endStandby: (() => void) | undefined;

  constructor(store: HarnessStore, options: StoreTenureOptions) {
    this.#options = options;
    const { clock, logger } = options;
    this.#claim = new StoreClaim(store, {
      identity: options.identity,
      clock,
      takeover: options.takeover,
      renewMs: options.renewMs,
      onFenced: options.onFenced,
      onTaken: (previous, live) => {
        // A live holder, taken over, finds itself fenced and closes its executors (1001).
        if (!live) this.#tookOver = true;
        logger.warn(
          live
            ? "took the harness store over from a live harness; it is fenced"
            : "took the harness store from a harness that stopped renewing it (gone, or frozen: fenced if it wakes)",
          { holder: describeHolder(previous, clock.now()) },
        );
      },
      onStopped: (previous) =>
        logger.warn(
          "ended the store's stale holder on this machine: frozen, it held the database's lock",
          { holder: describeHolder(previous, clock.now()) },
        ),
    });
    this.store = this.#claim.store;
  }

  /** Whether another live harness holds the store and this one waits for it (`standby`). */
  get standingBy(): boolean {
    return this.#standingBy;
  }

  /**
   * Whether the claim took the store from a harness that did not let go and stopped renewing
   * (gone, or frozen): its executors may still be attached to it, unaware.
   */
  get tookOver(): boolean {
    return this.#tookOver;
  }

  /**
   * Claims the store, then renews the claim every `renewMs` until {@linkcode stop}: throws (or
   * rejects with) `StoreHeldError` while a live harness holds it, unless this one stands by.
   */
  claim(): MaybePromise<void> {
    const claimed = this.#options.standby ? this.#standBy() : this.#claim.claim();
    if (isPromiseLike(claimed)) return claimed.then(() => this.#renewLater());
    this.#renewLater();
  }

  /** Stops renewing the claim (and standing by): the harness is closing. */
  stop(): void {
    this.#ended = true;
    this.#endStandby?.();
  }

  /** Lets go of the store: the next harness claims it at once. */
  async release(): Promise<void> {
    try {
      await this.#claim.release();
    } catch { /* a store that cannot be written is logged where it fails */ }
  }

  /**
   * Claims the store once no live harness holds it: tries now, then every `renewMs` (a holder
   * that stopped renewing is gone after three of them, one that let go at once).
   */
  #standBy(): Promise<void> {
    const { clock, logger, scheduler, renewMs } = this.#options;
    return new Promise<void>((resolve, reject) => {
      this.#endStandby = () => reject(new HarnessClosedError());
      const attempt = () => {
        if (this.#ended) return;
        let claimed: MaybePromise<void>;
        try {
          claimed = this.#claim.claim();
        } catch (error) {
          waitOrFail(error);
          return;
        }
        Promise.resolve(claimed).then(() => {
          this.#endStandby = undefined;
          if (this.#standingBy) {
            logger.info("the store's holder is gone: this harness holds it now");
          }
          this.#standingBy = false;
          resolve();
        }, waitOrFail);
      };
      let failing = false;
      const waitOrFail = (error: unknown) => {
        if (
          error instanceof InvalidStoreRequestError || error instanceof StoreClosedError ||
          error instanceof StoreFormatError || this.#ended
        ) {
          this.#endStandby = undefined;
          reject(error);
          return;
        }
        this.#standingBy = true;
        if (error instanceof StoreHeldError) {
          if (!this.#heldLogged) {
            this.#heldLogged = true;
            logger.info("standing by: another harness holds the store", {
              holder: describeHolder(error.holder, clock.now()),
            });
          }
          failing = false;
        } else if (!failing) {
          // The store is locked or unreachable: claimed later, never served unread.
          failing = true;
          logger.warn("standing by: the store cannot be claimed now; retrying", {
            error: String(error),
          });
        }
        scheduler.set(new CallbackDeadline(attempt), clock.now() + renewMs);
      };
      attempt();
    });
  }

  /** Renews the claim every `renewMs`, until the tenure ends or another harness fenced it. */
  #renewLater(): void {
    const { clock, scheduler, renewMs, onRenewed } = this.#options;
    const claim = this.#claim;
    // A fenced claim closes the harness; a failing store is told to `onRenewed`.
    const failed = (error: unknown) => onRenewed?.(true, error);
    const renew = new CallbackDeadline(() => {
      if (this.#ended || claim.fenced) return;
      try {
        const renewed = claim.renew();
        if (isPromiseLike(renewed)) renewed.then(() => onRenewed?.(false), failed);
        else onRenewed?.(false);
      } catch (error) {
        failed(error);
      }
      scheduler.set(renew, clock.now() + renewMs);
    });
    scheduler.set(renew, clock.now() + renewMs);
  }
}
