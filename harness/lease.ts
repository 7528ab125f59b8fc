/**
 * A deadline on the injected clock that can be pushed back: the executor lease (renewed by each
 * heartbeat, expired by two missed ones) and the token deadline (moved by a refreshed token).
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

/**
 * The executor lease: it lasts two heartbeat intervals from the last heartbeat (or the
 * registration), so two missed heartbeats expire it.
 */
export class Lease {
  readonly #deadline: Deadline;
  readonly #clock: Clock;
  readonly #durationMs: number;

  constructor(clock: Clock, heartbeatIntervalMs: number, onExpire: () => void) {
    this.#clock = clock;
    this.#durationMs = 2 * heartbeatIntervalMs;
    this.#deadline = new Deadline(clock, onExpire);
  }

  /** Renews the lease from now; returns the new expiry (ms since the epoch). */
  renew(): number {
    const at = this.#clock.now() + this.#durationMs;
    this.#deadline.set(at);
    return at;
  }

  /** The current expiry, if the lease was started. */
  get expiresAt(): number | undefined {
    return this.#deadline.at;
  }

  /** Whether it expired or was ended. */
  get ended(): boolean {
    return this.#deadline.done;
  }

  /** Ends the lease without expiring it (the executor closed for good). */
  end(): void {
    this.#deadline.cancel();
  }
}
