/**
 * Waiting for workerd to evict an idle Durable Object, shared by the Workers tests and the
 * Durable Object store test. workerd evicts an object 10 s after it went idle, and each look at
 * it wakes it and starts that over; on a busy machine workerd's timer fires late, and a look
 * every 11 s can come first every time. So the looks come further apart each time: 11, 12, 14,
 * 18, 26, 42 s, ...
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
