/**
 * A {@linkcode Clock} whose timers ride the Durable Object's one alarm, beside the harness's
 * deadlines. workerd does not evict an object while a `setTimeout` of it is pending, and the
 * harness's peers keep one armed for their requests' timeouts (up to the request timeout after
 * the last request): with these timers on the alarm the object may be evicted as soon as it is
 * idle. The timers are in memory, for what dies with the incarnation anyway.
 */
import type { Clock, TimerHandle } from "../../protocol/clock.ts";

interface Timer {
  readonly at: number;
  readonly fn: () => void;
}

/** The object's clock: `Date.now()`, and timers on its alarm. */
export class AlarmClock implements Clock {
  readonly #setAlarm: (at: number) => void;
  readonly #deadline: () => number | undefined;
  readonly #timers = new Map<number, Timer>();
  #nextId = 1;
  /** When the alarm is set for, as far as this incarnation set it. */
  #armedAt: number | undefined;

  /**
   * A clock setting the alarm with `setAlarm` (`ctx.storage.setAlarm`) for its timers and for
   * `deadline()`, the harness's earliest deadline (`harness.nextDeadline`).
   */
  constructor(setAlarm: (at: number) => void, deadline: () => number | undefined) {
    this.#setAlarm = setAlarm;
    this.#deadline = deadline;
  }

  /** Now, in ms since the epoch. */
  now(): number {
    return Date.now();
  }

  /** Runs `fn` from the alarm once `ms` have passed. */
  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#nextId++;
    this.#timers.set(id, { at: this.now() + Math.max(0, ms), fn });
    this.#arm();
    return id;
  }

  /** Cancels a timer. */
  clearTimeout(handle: TimerHandle): void {
    this.#timers.delete(handle as number);
  }

  /** The harness's earliest deadline moved (its scheduler's `wake`). */
  wake(): void {
    this.#arm();
  }

  /**
   * The alarm went off: runs the timers that are due and then `deadlines` (the harness's), and
   * sets the alarm for what is left.
   */
  alarm(deadlines: () => void): void {
    this.#armedAt = undefined;
    const now = this.now();
    for (const [id, timer] of this.#timers) {
      if (timer.at > now) continue;
      this.#timers.delete(id);
      timer.fn();
    }
    deadlines();
    this.#armedAt = undefined;
    this.#arm();
  }

  /** Sets the alarm when what is due first comes before it (an early alarm finds nothing). */
  #arm(): void {
    let at = this.#deadline();
    for (const timer of this.#timers.values()) if (at === undefined || timer.at < at) at = timer.at;
    if (at === undefined || (this.#armedAt !== undefined && this.#armedAt <= at)) return;
    this.#armedAt = at;
    this.#setAlarm(at);
  }
}
