/**
 * Continuing after a store call that may answer synchronously: the memory, SQLite and Durable
 * Object stores return their answer directly, so the harness decides without a microtask; a
 * store on the network returns a promise, and only then is it awaited.
 */
import { isPromiseLike, type MaybePromise } from "./store/store.ts";

/** `fn(value)`, at once when `value` is not a promise, else once it resolves. */
export function then<T, R>(
  value: MaybePromise<T>,
  fn: (value: T) => MaybePromise<R>,
): MaybePromise<R> {
  return isPromiseLike(value) ? value.then(fn) : fn(value);
}
