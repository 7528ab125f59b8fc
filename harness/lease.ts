/**
 * Deadlines on the injected clock that can be pushed back: the executor leases (renewed by each
 * heartbeat, expired by two missed ones) and movable deadlines such as a token's.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";

/** A movable deadline that calls `onExpire` once when it passes. */
export class Deadline {
  readonly #clock: Clock;
  readonly #onExpire: () => void;
  #timer: TimerHandle | undefined;
  #at: number | undefined;
  #done = false;

  constructor(clock: Clock, onExpire: () => void) {
    this.#clock = clock;
    this.#onExpire = onExpire;
  }

  /** When it expires (ms since the epoch), or `undefined` when not set. */
  get at(): number | undefined {
    return this.#at;
  }

  /** Whether it has expired or been cancelled. */
  get done(): boolean {
    return this.#done;
  }

  /** Sets (or moves) the deadline to `at` (ms since the epoch). Ignored once done. */
  set(at: number): void {
    if (this.#done) return;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#at = at;
    this.#timer = this.#clock.setTimeout(() => {
      this.#timer = undefined;
      if (this.#done) return;
      this.#done = true;
      this.#onExpire();
    }, Math.max(0, at - this.#clock.now()));
  }

  /** Stops it for good without calling `onExpire`. */
  cancel(): void {
    this.#done = true;
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}

/** What a {@linkcode Lease} tells when it expires (an object, so no closure is kept per lease). */
export interface LeaseHolder {
  leaseExpired(): void;
}

/**
 * The executor leases of one harness. Every lease lasts the same time (two heartbeat
 * intervals) from its last renewal, so they expire in the order they were renewed: they are
 * kept in that order in a list, and one timer, due at the first one's expiry, serves them all,
 * where a timer per executor, reset by each heartbeat, would cost a timer object and a closure
 * per executor.
 */
export class Leases {
  readonly #clock: Clock;
  readonly #durationMs: number;
  /** The lease that expires first, and the last. */
  #head: Lease | undefined;
  #tail: Lease | undefined;
  #timer: TimerHandle | undefined;
  /** When the timer is due. */
  #timerAt = 0;

  constructor(clock: Clock, heartbeatIntervalMs: number) {
    this.#clock = clock;
    this.#durationMs = 2 * heartbeatIntervalMs;
  }

  /** A lease, not started until renewed. */
  lease(holder: LeaseHolder): Lease {
    return new Lease(this, holder);
  }

  /** Starts or renews a lease from now; returns its expiry (ms since the epoch). */
  renew(lease: Lease): number {
    const at = this.#clock.now() + this.#durationMs;
    if (lease.ended) return at;
    this.#unlink(lease);
    lease.expiresAt = at;
    // After the last lease, unless the clock went back: the list stays in expiry order.
    let before = this.#tail;
    while (before && before.expiresAt! > at) before = before.previous;
    lease.previous = before;
    lease.next = before ? before.next : this.#head;
    if (lease.next) lease.next.previous = lease;
    else this.#tail = lease;
    if (before) before.next = lease;
    else this.#head = lease;
    if (this.#timer === undefined || this.#timerAt > this.#head!.expiresAt!) this.#arm();
    return at;
  }

  /** Ends a lease without expiring it. */
  end(lease: Lease): void {
    if (lease.ended) return;
    lease.ended = true;
    this.#unlink(lease);
    // The timer stays for the others (it re-arms when it finds nothing due); none are left: gone.
    if (!this.#head) this.#disarm();
  }

  #unlink(lease: Lease): void {
    const { previous, next } = lease;
    if (previous) previous.next = next;
    else if (this.#head === lease) this.#head = next;
    else return; // not in the list
    if (next) next.previous = previous;
    else this.#tail = previous;
    lease.previous = undefined;
    lease.next = undefined;
  }

  #arm(): void {
    this.#disarm();
    const head = this.#head;
    if (!head) return;
    const clock = this.#clock;
    this.#timerAt = head.expiresAt!;
    this.#timer = clock.setTimeout(() => {
      this.#timer = undefined;
      this.#expire();
    }, Math.max(0, this.#timerAt - clock.now()));
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Expires the first lease if it is due (one per timer, as if each had its own: what the
   * expiry starts settles before the next one), then waits for the next.
   */
  #expire(): void {
    const head = this.#head;
    if (head && head.expiresAt! <= this.#clock.now()) {
      head.ended = true;
      this.#unlink(head);
      // Armed first: the holder may renew or end other leases.
      this.#arm();
      head.holder.leaseExpired();
      return;
    }
    this.#arm();
  }
}

/**
 * The executor lease: it lasts two heartbeat intervals from the last heartbeat (or the
 * registration), so two missed heartbeats expire it. Timed by its {@linkcode Leases}.
 */
export class Lease {
  /** The current expiry, if the lease was started. */
  expiresAt: number | undefined;
  /** Whether it expired or was ended. */
  ended = false;
  /** Neighbours in the expiry order of its {@linkcode Leases}. */
  previous: Lease | undefined;
  next: Lease | undefined;
  readonly holder: LeaseHolder;
  readonly #leases: Leases;

  constructor(leases: Leases, holder: LeaseHolder) {
    this.#leases = leases;
    this.holder = holder;
  }

  /** Renews the lease from now; returns the new expiry (ms since the epoch). */
  renew(): number {
    return this.#leases.renew(this);
  }

  /** Ends the lease without expiring it (the executor closed for good). */
  end(): void {
    this.#leases.end(this);
  }
}
