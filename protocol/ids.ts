/**
 * The SDK's one maker of random ids (tool calls, executors, interactions, events, inputs):
 * 96 bits from the system's CSPRNG, in hex, after a prefix.
 *
 * Random bytes are drawn 4 KiB at a time: one `getRandomValues` per id costs more than the rest
 * of a tool call's id handling, and `callTool` makes one per call.
 */

const HEX: readonly string[] = Array.from(
  { length: 256 },
  (_, b) => b.toString(16).padStart(2, "0"),
);

/** `bytes[start, end)` in lower-case hex, after `prefix` (read in place: a view per id costs more on Bun). */
export function hex(bytes: Uint8Array, start = 0, end: number = bytes.length, prefix = ""): string {
  let out = prefix;
  for (let i = start; i < end; i++) out += HEX[bytes[i]];
  return out;
}

const POOL_BYTES = 4096;
let pool = new Uint8Array(0);
let poolAt = 0;

/** `bytes` random bytes from the pool, in hex, after `prefix`. */
export function randomHex(bytes: number, prefix = ""): string {
  if (bytes > POOL_BYTES) {
    return hex(crypto.getRandomValues(new Uint8Array(bytes)), 0, bytes, prefix);
  }
  if (poolAt + bytes > pool.length) {
    pool = crypto.getRandomValues(new Uint8Array(POOL_BYTES));
    poolAt = 0;
  }
  const id = hex(pool, poolAt, poolAt + bytes, prefix);
  poolAt += bytes;
  return id;
}

/** A random id with a prefix, e.g. `exec_3f9c…` (96 random bits: 24 hex digits). */
export function randomId(prefix: string): string {
  return randomHex(12, prefix);
}
