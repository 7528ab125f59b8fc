/** Waiting and backoff through the injected clock, so tests drive every delay by hand. */

// The backoff and the wait are the SDK's one retry rule (protocol/retry.ts).
export { backoffDelay, type BackoffPolicy, sleep } from "../protocol/retry.ts";

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

/** Describes an error for a log record without its stack (never throws). */
export { describeError } from "../protocol/errors.ts";
