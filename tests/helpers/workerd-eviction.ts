/**
 * Evicting a Durable Object in workerd, shared by the Workers tests and the Durable Object store
 * test, two ways:
 *
 * - {@linkcode evictNow}, inside the Worker: workerd's own idle eviction (its in-memory object
 *   dropped, storage kept, hibernatable sockets hibernated), started at once through the
 *   test-only `workerd:unsafe` module (the `unsafe_module` compatibility flag; Miniflare runs
 *   workerd with `--experimental`). It waits for the object's live requests to end, so it does
 *   not depend on how busy the machine is.
 * - {@linkcode untilEvicted}, from outside: waiting until the object went idle and workerd
 *   evicted it on its own timer (10 s after the object's last request or alarm), which shows
 *   that nothing keeps the object awake. Each look at it wakes it and starts that over; on a
 *   busy machine workerd's timer fires late, and a look every 11 s can come first every time,
 *   so the looks come further apart each time: 11, 12, 14, 18, 26, 42 s, ...
 */

/** How long workerd lets an idle Durable Object stay in memory. */
const EVICT_AFTER_IDLE_MS = 10_000;

/**
 * Resolves once `look` (which names the object's in-memory incarnation, waking it) names one
 * other than `before`.
 */
export async function untilEvicted(look: () => Promise<string>, before: string): Promise<void> {
  for (let late = 1_000;; late *= 2) {
    await new Promise((resolve) => setTimeout(resolve, EVICT_AFTER_IDLE_MS + late));
    if ((await look()) !== before) return;
  }
}

/** The part of `workerd:unsafe` used here. */
interface WorkerdUnsafe {
  evict(stub: unknown, options?: { webSockets?: "hibernate" | "close" }): Promise<void>;
}

// A module of workerd's own: the bundler leaves a specifier it cannot see alone.
const WORKERD_UNSAFE = "workerd:unsafe";

/**
 * Inside a Worker run with the `unsafe_module` compatibility flag: evicts the running Durable
 * Object behind `stub` through workerd's idle-eviction path, once its live requests ended.
 */
export async function evictNow(stub: unknown): Promise<void> {
  const unsafe = (await import(WORKERD_UNSAFE) as { default: WorkerdUnsafe }).default;
  await unsafe.evict(stub);
}
