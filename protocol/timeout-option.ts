/**
 * The one rule for a timeout a caller gives in milliseconds (`timeoutMs`, `0` waiting forever):
 * a negative or non-number one would wait forever unseen, and one beyond what a timer can hold
 * (2^31 − 1 ms, about 24.8 days) would fire at once on Node and Bun.
 */
import { InvalidCallOptionError } from "./errors.ts";

/** The longest timer the runtimes keep as given, in ms. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** Whether `ms` is a span of time a timer can hold: a number from 0 to {@linkcode MAX_TIMEOUT_MS}. */
export function isTimerSpan(ms: unknown): ms is number {
  return typeof ms === "number" && ms >= 0 && ms <= MAX_TIMEOUT_MS;
}

/** Throws {@linkcode InvalidCallOptionError} unless `timeoutMs` is 0 (forever) or a timer's span. */
export function checkTimeoutOption(timeoutMs: unknown, method: string, option = "timeoutMs"): void {
  if (!isTimerSpan(timeoutMs)) {
    throw new InvalidCallOptionError(
      method,
      option,
      `must be a number of ms from 0 (wait forever) to ${MAX_TIMEOUT_MS}`,
    );
  }
}
