/**
 * Whether a harness takes executors now, as `/readyz` tells a load balancer.
 *
 * - `starting`: it is claiming its store or reading it back;
 * - `standby`: another live harness holds the store, and this one waits to take it over;
 * - `serving`: it holds its store and takes executors;
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
  | "draining"
  | "fenced"
  | "closed";
