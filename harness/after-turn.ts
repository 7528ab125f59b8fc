/**
 * `afterTurn`: a callback once this turn of the event loop has handled its I/O, on every runtime
 * (Node's, Deno's and Bun's `setImmediate`; a zero timer where there is none, as on Workers).
 *
 * @module
 */

const setImmediateOf = (globalThis as { setImmediate?: (run: () => void) => unknown })
  .setImmediate;

/** Runs `run` once this turn of the event loop has handled its I/O. */
export function afterTurn(run: () => void): void {
  if (setImmediateOf !== undefined) setImmediateOf(run);
  else setTimeout(run, 0);
}
