/**
 * The executor leases: a lease lasts two heartbeat intervals from its last renewal (a
 * heartbeat, a registration, or the harness's recovery), so two missed heartbeats expire it.
 * Each lease is a {@linkcode Deadline} of the harness's {@linkcode Scheduler}: no timer per
 * executor.
 */
import type { Clock } from "../protocol/clock.ts";
import { Deadline, Scheduler } from "./scheduler.ts";

/** What a {@linkcode Lease} tells when it expires (an object, so no closure is kept per lease). */
export interface LeaseHolder {
  leaseExpired(): void;
}

/** The executor leases of one harness, on its scheduler. */
export class Leases {
  readonly #clock: Clock;
  readonly #durationMs: number;
  readonly #scheduler: Scheduler;

  /** `scheduler` defaults to one of its own on `clock`. */
  constructor(clock: Clock, heartbeatIntervalMs: number, scheduler?: Scheduler) {
    this.#clock = clock;
    this.#durationMs = 2 * heartbeatIntervalMs;
    this.#scheduler = scheduler ?? new Scheduler(clock);
  }

  /** How long a lease lasts from a renewal: two heartbeat intervals. */
  get durationMs(): number {
    return this.#durationMs;
  }

  /** A lease, not started until renewed. */
  lease(holder: LeaseHolder): Lease {
    return new Lease(this, holder);
  }

  /** Starts or renews a lease from now; returns its expiry (ms since the epoch). */
  renew(lease: Lease): number {
    return this.extend(lease, this.#clock.now() + this.#durationMs);
  }

  /**
   * Sets a lease's expiry to `at` (a lease restored from a snapshot or the store). Returns the
   * expiry; an ended lease stays ended.
   */
  extend(lease: Lease, at: number): number {
    if (lease.ended) return at;
    lease.expiresAt = at;
    this.#scheduler.set(lease, at);
    return at;
  }

  /** Ends a lease without expiring it. */
  end(lease: Lease): void {
    if (lease.ended) return;
    lease.ended = true;
    this.#scheduler.clear(lease);
  }
}

/**
 * The executor lease: it lasts two heartbeat intervals from the last heartbeat (or the
 * registration), so two missed heartbeats expire it.
 */
export class Lease extends Deadline {
  /** The current expiry, if the lease was started. */
  expiresAt: number | undefined;
  /** Whether it expired or was ended. */
  ended = false;
  readonly holder: LeaseHolder;
  readonly #leases: Leases;

  constructor(leases: Leases, holder: LeaseHolder) {
    super();
    this.#leases = leases;
    this.holder = holder;
  }

  /** Renews the lease from now; returns the new expiry (ms since the epoch). */
  renew(): number {
    return this.#leases.renew(this);
  }

  /** Sets the expiry to `at` (a restored lease). */
  extend(at: number): number {
    return this.#leases.extend(this, at);
  }

  /** Ends the lease without expiring it (the executor closed for good). */
  end(): void {
    this.#leases.end(this);
  }

  /** Called by the scheduler. */
  due(): void {
    if (this.ended) return;
    this.ended = true;
    this.holder.leaseExpired();
  }
}
