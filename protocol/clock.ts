/**
 * Time as an injectable dependency. Leases, heartbeats, token deadlines, request timeouts and
 * reconnect backoff all read time and set timers through a {@linkcode Clock}, so tests drive
 * them with a {@linkcode ManualClock} instead of waiting.
 */

/** An opaque handle for a timer set through a {@linkcode Clock}. */
export type TimerHandle = { readonly __timer: unique symbol } | number | object;

/** A source of time and timers. */
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `fn` once after `ms` milliseconds. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
  /** Cancels a timer; unknown or fired handles are ignored. */
  clearTimeout(handle: TimerHandle): void;
}

/**
 * The longest delay the runtimes' timers take (2^31 - 1 ms, about 24.8 days): a longer one fires
 * at once on Node, Deno and Bun, so longer timers are chained (a timeout the peer chose, such as
 * a `timeout_ms` of 5e9, then waits as long as it said).
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer longer than {@linkcode MAX_TIMER_MS}: global timers, one after the other. */
class LongTimer {
  #native: ReturnType<typeof globalThis.setTimeout> | undefined;
  constructor(fn: () => void, ms: number) {
    const at = Date.now() + ms;
    const arm = () => {
      const left = at - Date.now();
      this.#native = left > MAX_TIMER_MS
        ? globalThis.setTimeout(arm, MAX_TIMER_MS)
        : globalThis.setTimeout(fn, Math.max(0, left));
    };
    arm();
  }
  clear(): void {
    if (this.#native !== undefined) globalThis.clearTimeout(this.#native);
  }
}

/** The real clock: `Date.now` and the global timers. */
export const systemClock: Clock = {
  now: (): number => Date.now(),
  setTimeout: (fn: () => void, ms: number): TimerHandle =>
    ms > MAX_TIMER_MS ? new LongTimer(fn, ms) : globalThis.setTimeout(fn, ms),
  clearTimeout: (handle: TimerHandle): void => {
    if (handle instanceof LongTimer) handle.clear();
    else globalThis.clearTimeout(handle as ReturnType<typeof globalThis.setTimeout>);
  },
};

interface ManualTimer {
  readonly id: number;
  readonly at: number;
  readonly fn: () => void;
}

/**
 * A clock that moves only when told to. Timers fire in due order during
 * {@linkcode ManualClock.advance}, each seeing `now()` equal to its due time.
 */
export class ManualClock implements Clock {
  #now: number;
  #nextId = 1;
  #timers = new Map<number, ManualTimer>();

  /** Starts at `start` milliseconds since the epoch (default 2026-01-01T00:00:00Z). */
  constructor(start: number = Date.UTC(2026, 0, 1)) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#nextId++;
    this.#timers.set(id, { id, at: this.#now + Math.max(0, ms), fn });
    return { id } as unknown as TimerHandle;
  }

  clearTimeout(handle: TimerHandle): void {
    const id = (handle as unknown as { id?: number } | undefined)?.id;
    if (id !== undefined) this.#timers.delete(id);
  }

  /** How many timers are waiting. */
  get pendingTimers(): number {
    return this.#timers.size;
  }

  /**
   * Moves time forward by `ms`, firing every timer that falls due on the way, in order.
   * Awaits a macrotask turn after each timer so promise chains it starts can settle (and set
   * further timers) before the next one fires.
   */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    for (;;) {
      await settle();
      let next: ManualTimer | undefined;
      for (const timer of this.#timers.values()) {
        if (
          timer.at <= target &&
          (!next || timer.at < next.at || (timer.at === next.at && timer.id < next.id))
        ) {
          next = timer;
        }
      }
      if (!next) break;
      this.#timers.delete(next.id);
      this.#now = Math.max(this.#now, next.at);
      next.fn();
    }
    this.#now = target;
    await settle();
  }
}

/** Lets pending promise reactions and queued I/O callbacks run. */
function settle(): Promise<void> {
  return new Promise((resolve) => globalThis.setTimeout(resolve, 0));
}
