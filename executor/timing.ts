/** Waiting and backoff through the injected clock, so tests drive every delay by hand. */
import type { Clock } from "../protocol/clock.ts";

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

/** A promise with its settle functions exposed. */
export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

/** Makes a {@linkcode Deferred}. */
export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Describes an error for a log record without its stack. */
export function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
