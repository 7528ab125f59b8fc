/**
 * A long poll's wait: a promise raced against its longest wait and the request's signal.
 *
 * Portable: web-standard timers only.
 *
 * @module
 */

/**
 * Waits for `promise` at most `ms` (and at least one task), or until `signal` aborts.
 * `done: true` with the value once it resolved; with `settleErrors` a rejection is returned as
 * `error`, else it is thrown.
 */
export async function within<T>(
  promise: Promise<T>,
  ms: number,
  signal: AbortSignal,
  settleErrors = false,
): Promise<{ done: true; value: T; error?: undefined } | { done: false; error?: unknown }> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  const gaveUp = new Promise<{ done: false }>((resolve) => {
    timer = setTimeout(() => resolve({ done: false }), signal.aborted ? 0 : ms);
    onAbort = () => resolve({ done: false });
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ done: true as const, value }),
        (error) => {
          if (!settleErrors) throw error;
          return { done: false as const, error };
        },
      ),
      gaveUp,
    ]);
  } finally {
    clearTimeout(timer);
    signal.removeEventListener("abort", onAbort!);
  }
}
