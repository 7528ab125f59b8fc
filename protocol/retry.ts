/**
 * Sending again: the one backoff, wait and retry rule of the SDK (the executor's deliveries,
 * the agent capability's resent requests on both ends), on the injected clock so tests drive
 * every delay by hand.
 */
import type { Clock } from "./clock.ts";
import { ProtocolError, RequestTimeoutError } from "./errors.ts";
import { RETRYABLE_ERROR_CODES } from "./generated/errors.ts";

/** Exponential backoff with jitter and a cap. */
export interface BackoffPolicy {
  /** Delay before the first retry, in ms. Default 250. */
  initialDelayMs?: number;
  /** The cap on any delay, in ms. Default 30 000. */
  maxDelayMs?: number;
  /** Growth factor per attempt. Default 2. */
  multiplier?: number;
  /**
   * Fraction of each delay that is randomized, 0..1. Default 0.5: a delay `d` becomes a value in
   * `[d * (1 - jitter), d]`, so executors cut off together do not reconnect together.
   */
  jitter?: number;
}

/** The delay before retry number `attempt` (1-based) under `policy`. */
export function backoffDelay(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number,
): number {
  const initial = policy.initialDelayMs ?? 250;
  const max = policy.maxDelayMs ?? 30_000;
  const multiplier = policy.multiplier ?? 2;
  const jitter = Math.min(1, Math.max(0, policy.jitter ?? 0.5));
  const base = Math.min(max, initial * Math.pow(multiplier, Math.max(0, attempt - 1)));
  return Math.max(0, Math.round(base * (1 - jitter * random())));
}

/** Resolves after `ms` on `clock`; rejects with the signal's reason when aborted first. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Whether a failed request may be sent again unchanged: a timeout, or an error code the
 * contract marks retryable (`x-retryable`: -32004, -32009).
 */
export function isRetryable(error: unknown): boolean {
  return error instanceof RequestTimeoutError ||
    (error instanceof ProtocolError && RETRYABLE_ERROR_CODES.has(error.code));
}

/** How long to wait before retry `attempt`: the peer's `data.retry_after_ms`, else the backoff. */
export function retryDelay(
  error: unknown,
  policy: BackoffPolicy,
  attempt: number,
  random: () => number,
): number {
  const hinted = error instanceof ProtocolError
    ? (error.data as { retry_after_ms?: unknown } | undefined)?.retry_after_ms
    : undefined;
  return typeof hinted === "number" && hinted >= 0 ? hinted : backoffDelay(policy, attempt, random);
}

/** Options of {@linkcode retrying}. */
export interface RetryOptions {
  /** The clock the waits run on. */
  readonly clock: Clock;
  /** The backoff between attempts. */
  readonly policy: BackoffPolicy;
  /** Randomness for the jitter. Default `Math.random`. */
  readonly random?: () => number;
  /** Stops the waits between attempts (rejects with its reason). */
  readonly signal?: AbortSignal;
  /**
   * What an attempt's failure means: `"retry"` after the backoff, `"again"` at once (a lost
   * connection: the next attempt waits for a new one), or `"fail"`. Default: the contract's
   * rule ({@linkcode isRetryable}).
   */
  readonly classify?: (error: unknown) => "retry" | "again" | "fail";
}

/**
 * Runs `attempt` until it resolves: a failure `classify` calls retryable is tried again after
 * the backoff (or the peer's `retry_after_ms`), one it calls `again` at once; any other
 * failure rejects.
 */
export async function retrying<T>(
  attempt: (n: number) => Promise<T>,
  options: RetryOptions,
): Promise<T> {
  const classify = options.classify ?? ((error) => isRetryable(error) ? "retry" : "fail");
  const random = options.random ?? Math.random;
  let failures = 0;
  for (let n = 1;; n++) {
    try {
      return await attempt(n);
    } catch (error) {
      const verdict = classify(error);
      if (verdict === "fail") throw error;
      if (verdict === "again") continue;
      failures++;
      await sleep(
        options.clock,
        retryDelay(error, options.policy, failures, random),
        options.signal,
      );
    }
  }
}
