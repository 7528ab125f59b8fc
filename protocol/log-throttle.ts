/**
 * A line that a peer's every request can cause (a refused credential, a refused upgrade) is
 * logged at most once per interval: a stream of bad requests must not turn into a stream of log
 * lines that fills a disk. The lines left out are counted, and the next one logged says how many.
 *
 * Portable: the clock is injected.
 *
 * @module
 */
import type { Clock } from "./clock.ts";
import type { LogFields } from "./logger.ts";

/** The default interval between two lines of one kind: one second. */
export const LOG_THROTTLE_MS = 1_000;

/** Lets one line of a kind through per interval, counting the others. */
export class LogThrottle {
  readonly #clock: Clock;
  readonly #intervalMs: number;
  #lastAt = Number.NEGATIVE_INFINITY;
  #left = 0;

  /** One line per `intervalMs` of `clock`'s time. */
  constructor(clock: Clock, intervalMs: number = LOG_THROTTLE_MS) {
    this.#clock = clock;
    this.#intervalMs = intervalMs;
  }

  /**
   * `fields` to log now (with `lines_left_out`, the lines of this kind not logged since the
   * last, when there were any), or `undefined` when this line is left out.
   */
  pass(fields: LogFields): LogFields | undefined {
    const now = this.#clock.now();
    // A clock stepped back (an NTP correction) does not silence the kind until it catches up.
    if (now >= this.#lastAt && now - this.#lastAt < this.#intervalMs) {
      this.#left++;
      return undefined;
    }
    this.#lastAt = now;
    const left = this.#left;
    this.#left = 0;
    return left > 0 ? { ...fields, lines_left_out: left } : fields;
  }
}
