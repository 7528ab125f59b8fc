/**
 * The SDK's one way for a wait to honour an `AbortSignal`: every public call that waits (on a
 * peer, a connection, a process or a timer) and takes a `signal` rejects with
 * {@linkcode RequestAbortedError} once it aborts, the signal's reason as the error's `cause`. An
 * already-aborted signal rejects at once and nothing is started. Aborting stops the wait only:
 * what was already sent or started goes on (a caller that must undo it, as a tool call's
 * `tool.cancel`, says so with `onAbort`).
 */
import { InvalidCallOptionError, RequestAbortedError } from "./errors.ts";

/**
 * Throws {@linkcode InvalidCallOptionError} when `signal` is given but is no `AbortSignal` (an
 * `AbortController` passed by mistake would fail later, when the wait ends, out of the caller's
 * reach). Duck-typed: a signal of another realm or a polyfill is one too.
 */
export function checkSignal(signal: unknown, method: string): void {
  if (signal === undefined) return;
  const s = signal as Partial<AbortSignal> | null;
  if (
    typeof s !== "object" || s === null || typeof s.aborted !== "boolean" ||
    typeof s.addEventListener !== "function" || typeof s.removeEventListener !== "function"
  ) {
    throw new InvalidCallOptionError(method, "signal", "is not an AbortSignal");
  }
}

/**
 * Throws {@linkcode RequestAbortedError} for `method` when `signal` has aborted (and
 * {@linkcode InvalidCallOptionError} when it is no `AbortSignal`).
 */
export function throwIfAborted(signal: AbortSignal | undefined, method: string): void {
  if (signal === undefined) return;
  checkSignal(signal, method);
  if (signal.aborted) throw new RequestAbortedError(method, signal.reason);
}

/**
 * A promise rejected with {@linkcode RequestAbortedError} for `method` when `signal` has aborted,
 * else `undefined`: `return aborted(signal, method) ?? start()` starts nothing once aborted.
 */
export function aborted(
  signal: AbortSignal | undefined,
  method: string,
): Promise<never> | undefined {
  try {
    checkSignal(signal, method);
  } catch (error) {
    return Promise.reject(error);
  }
  return signal?.aborted
    ? Promise.reject(new RequestAbortedError(method, signal.reason))
    : undefined;
}

/**
 * `promise`, unless `signal` aborts first: then it rejects with {@linkcode RequestAbortedError}
 * for `method` and `onAbort` runs (to withdraw a waiter, or cancel what the wait was for).
 * Without a signal it is `promise` itself, so a call given none pays nothing for this. The
 * abort listener is removed once `promise` settles, and `promise`'s own rejection is handled
 * either way (an abandoned wait must not report an unhandled rejection).
 */
export function raceSignal<T>(
  promise: Promise<T>,
  signal: AbortSignal | undefined,
  method: string,
  onAbort?: () => void,
): Promise<T> {
  if (!signal) return promise;
  try {
    checkSignal(signal, method);
  } catch (error) {
    promise.catch(() => {});
    return Promise.reject(error);
  }
  return new Promise<T>((resolve, reject) => {
    const abort = () => {
      reject(new RequestAbortedError(method, signal.reason));
      onAbort?.();
    };
    promise.then(
      (value) => {
        signal.removeEventListener("abort", abort);
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", abort);
        reject(error);
      },
    );
    if (signal.aborted) abort();
    else signal.addEventListener("abort", abort, { once: true });
  });
}

/** A signal that follows others until released: see {@linkcode linkedSignal}. */
export interface LinkedSignal {
  /** Aborts, with its reason, once any of the signals it follows does. */
  readonly signal: AbortSignal;
  /** Stops following them: nothing of this signal stays with them. */
  release(): void;
}

/**
 * A signal that aborts when any of `signals` does, until `release()`. Unlike `AbortSignal.any`,
 * whose result a long-lived source keeps an entry for (on Node 20, until that source aborts: a
 * client's stop signal joined to each connection attempt's deadline would grow for ever), a
 * released signal leaves nothing on its sources.
 */
export function linkedSignal(signals: readonly (AbortSignal | undefined)[]): LinkedSignal {
  const controller = new AbortController();
  const sources = signals.filter((s): s is AbortSignal => s !== undefined);
  const already = sources.find((s) => s.aborted);
  if (already) {
    controller.abort(already.reason);
    return { signal: controller.signal, release: () => {} };
  }
  const follow = (event: Event) => {
    release();
    controller.abort((event.target as AbortSignal).reason);
  };
  const release = () => {
    for (const source of sources) source.removeEventListener("abort", follow);
  };
  for (const source of sources) source.addEventListener("abort", follow);
  return { signal: controller.signal, release };
}
