/**
 * A full, synchronous garbage collection for tests that check what is let go (a `WeakRef`
 * cleared, memory returned): Bun's own call, or V8's `gc` (Node and Deno), exposed for a fresh
 * context without a command-line flag so the test runs the same under any runner.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Returns a function that runs a full garbage collection. */
export function fullCollection(): () => void {
  const bun = (globalThis as { Bun?: { gc(sync: boolean): void } }).Bun;
  if (bun) return () => bun.gc(true);
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  return () => gc();
}
