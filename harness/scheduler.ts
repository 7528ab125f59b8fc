/**
 * The harness's deadlines as data: every lease, register deadline, token expiry, stop and close
 * wait and interaction expiry is a {@linkcode Deadline} — an object with a due time and a
 * `due()` method — kept in one queue ordered by time. Nothing else in the harness sets a timer
 * for them.
 *
 * Who wakes the queue is a {@linkcode SchedulerDriver}: on Node, Deno and Bun one timer of the
 * harness's clock due at the earliest deadline ({@linkcode clockDriver}); in a Durable Object
 * the object's one alarm, which calls {@linkcode Scheduler.runDue} when it fires. Deadlines are
 * state that the harness can recompute from its store after a restart or an eviction, so a
 * driver never has to remember them itself: it only has to be woken at {@linkcode Scheduler.next}.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";

/**
 * One deadline. `at` and `slot` belong to the scheduler (read them, never write them); a class
 * implements `due()` instead of passing a closure, so a deadline held per executor costs no
 * function object.
 */
export abstract class Deadline {
  /** When it is due (ms since the epoch); `undefined` while not scheduled. */
  at: number | undefined = undefined;
  /** Its place in the scheduler's queue; -1 while not scheduled. */
  slot: number = -1;
  /** Breaks ties between equal times: the one set first runs first. */
  order: number = 0;
  /** Runs once when it falls due (the scheduler has removed it first). */
  abstract due(now: number): void;
}

/** A deadline that calls a function (for the few that are not held per executor). */
export class CallbackDeadline extends Deadline {
  readonly #fn: (now: number) => void;

  /** A deadline that runs `fn` when it falls due. */
  constructor(fn: (now: number) => void) {
    super();
    this.#fn = fn;
  }

  /** Runs the function. */
  due(now: number): void {
    this.#fn(now);
  }
}

/** Wakes a {@linkcode Scheduler}: asked to call `runDue()` at (or soon after) a time. */
export interface SchedulerDriver {
  /**
   * The earliest deadline is now `at` (`undefined`: none is left). Call the scheduler's
   * `runDue()` then; an earlier call finds nothing due and asks again.
   */
  wake(at: number | undefined): void;
  /** Stops waking for good (the harness closed). */
  stop?(): void;
}

/**
 * The deadlines of one harness, earliest first (a binary heap). Setting, moving and clearing a
 * deadline is O(log n); the driver is told only when the earliest one moves earlier, so renewing
 * thousands of leases (each pushed later) re-arms nothing.
 */
export class Scheduler {
  readonly #clock: Clock;
  readonly #heap: Deadline[] = [];
  #driver: SchedulerDriver;
  /** When the driver was last asked to wake (`undefined`: not asked). */
  #wakeAt: number | undefined;
  #running = false;
  #order = 0;

  /** A scheduler on `clock`, woken by `driver` (default: a timer of `clock`). */
  constructor(clock: Clock, driver?: SchedulerDriver) {
    this.#clock = clock;
    this.#driver = driver ?? clockDriver(clock, this);
  }

  /** The time of the earliest deadline, if any. */
  next(): number | undefined {
    return this.#heap[0]?.at;
  }

  /** How many deadlines are scheduled. */
  get size(): number {
    return this.#heap.length;
  }

  /** Sets (or moves) `deadline` to `at`. */
  set(deadline: Deadline, at: number): void {
    const heap = this.#heap;
    deadline.order = ++this.#order;
    if (deadline.slot < 0) {
      deadline.at = at;
      deadline.slot = heap.length;
      heap.push(deadline);
      this.#up(deadline.slot);
    } else {
      deadline.at = at;
      // Moved either way, or set again at the same time (now after its equals): both checks.
      this.#up(deadline.slot);
      this.#down(deadline.slot);
    }
    this.#rearm();
  }

  /** Removes `deadline` (nothing happens when it is not scheduled). */
  clear(deadline: Deadline): void {
    const slot = deadline.slot;
    if (slot < 0) return;
    const heap = this.#heap;
    const last = heap.pop()!;
    deadline.slot = -1;
    deadline.at = undefined;
    if (last !== deadline) {
      heap[slot] = last;
      last.slot = slot;
      this.#down(slot);
      this.#up(last.slot);
    }
    // Otherwise the driver keeps its wake time: waking early finds nothing due and re-arms.
    if (heap.length === 0 && !this.#running && this.#wakeAt !== undefined) {
      this.#wakeAt = undefined;
      this.#driver.wake(undefined);
    }
  }

  /**
   * Runs the deadlines due by `now` (default: the clock's time), earliest first, each removed
   * before it runs, at most `limit` of them; then asks the driver to wake at the next one.
   */
  runDue(now: number = this.#clock.now(), limit = Infinity): void {
    if (this.#running) return;
    this.#running = true;
    this.#wakeAt = undefined;
    try {
      const heap = this.#heap;
      for (let ran = 0; ran < limit && heap.length > 0 && heap[0].at! <= now; ran++) {
        const deadline = heap[0];
        this.clear(deadline);
        try {
          deadline.due(now);
        } catch {
          // A deadline's own failure must not stop the others (each logs its own).
        }
      }
    } finally {
      this.#running = false;
    }
    this.#rearm();
  }

  /** Replaces the driver (a Durable Object installs its alarm): it is asked to wake at once. */
  drive(driver: SchedulerDriver): void {
    this.#driver.stop?.();
    this.#driver = driver;
    this.#wakeAt = undefined;
    this.#rearm();
  }

  /** Stops the driver for good; deadlines stay as data. */
  stop(): void {
    this.#driver.stop?.();
    this.#wakeAt = undefined;
  }

  #rearm(): void {
    if (this.#running) return;
    const at = this.#heap[0]?.at;
    if (at === undefined) {
      if (this.#wakeAt !== undefined) this.#driver.wake(undefined);
      this.#wakeAt = undefined;
      return;
    }
    if (this.#wakeAt !== undefined && this.#wakeAt <= at) return;
    this.#wakeAt = at;
    this.#driver.wake(at);
  }

  /** Whether `a` runs before `b`. */
  static #before(a: Deadline, b: Deadline): boolean {
    return a.at! < b.at! || (a.at === b.at && a.order < b.order);
  }

  #up(slot: number): void {
    const heap = this.#heap;
    const item = heap[slot];
    while (slot > 0) {
      const parent = (slot - 1) >> 1;
      const above = heap[parent];
      if (!Scheduler.#before(item, above)) break;
      heap[slot] = above;
      above.slot = slot;
      slot = parent;
    }
    heap[slot] = item;
    item.slot = slot;
  }

  #down(slot: number): void {
    const heap = this.#heap;
    const n = heap.length;
    const item = heap[slot];
    for (;;) {
      const left = 2 * slot + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && Scheduler.#before(heap[right], heap[left]) ? right : left;
      if (!Scheduler.#before(heap[child], item)) break;
      heap[slot] = heap[child];
      heap[slot].slot = slot;
      slot = child;
    }
    heap[slot] = item;
    item.slot = slot;
  }
}

/**
 * The driver of Node, Deno and Bun: one timer of `clock`, due at the earliest deadline. A
 * timer due earlier than needed (its deadline was moved later or cleared) finds nothing due and
 * is set again for the next one.
 */
export function clockDriver(clock: Clock, scheduler: Scheduler): SchedulerDriver {
  let timer: TimerHandle | undefined;
  let timerAt = 0;
  return {
    wake(at) {
      if (at === undefined) {
        if (timer !== undefined) clock.clearTimeout(timer);
        timer = undefined;
        return;
      }
      if (timer !== undefined) {
        if (timerAt <= at) return;
        clock.clearTimeout(timer);
      }
      timerAt = at;
      // One deadline per timer, as if each had its own: what one starts (promise chains, other
      // deadlines moved) settles before the next runs.
      timer = clock.setTimeout(() => {
        timer = undefined;
        scheduler.runDue(undefined, 1);
      }, Math.max(0, at - clock.now()));
    },
    stop() {
      if (timer !== undefined) clock.clearTimeout(timer);
      timer = undefined;
    },
  };
}
