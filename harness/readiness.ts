/**
 * Whether a harness takes executors now, as `/readyz` tells a load balancer.
 *
 * - `starting`: it is claiming its store or reading it back;
 * - `standby`: another live harness holds the store, and this one waits to take it over;
 * - `serving`: it holds its store and takes executors;
 * - `store_failing`: it holds its store, but its last write there failed (a database that is
 *   down, a full disk): it refuses what it cannot record until a write succeeds again (the
 *   claim's renewal tries one every `storeRenewMs`, idle or not);
 * - `draining`: it was asked to stop, and refuses new executors and sessions;
 * - `fenced`: another harness took its store over: it writes nothing more;
 * - `closed`: it has stopped.
 *
 * @module
 */
export type HarnessReadiness =
  | "starting"
  | "standby"
  | "serving"
  | "store_failing"
  | "draining"
  | "fenced"
  | "closed";

/**
 * Whether a harness in `readiness` stands aside for another that holds (or took) its store:
 * `standby` or `fenced`. It answers an executor's requests (connect, token exchange, artifact
 * upload) with 503 and `retry-after: 1`, so that a load balancer tries the holder; a token it
 * signed, or an artifact it kept, would be another harness's to honour.
 */
export function standsAside(readiness: HarnessReadiness): readiness is "standby" | "fenced" {
  return readiness === "standby" || readiness === "fenced";
}
