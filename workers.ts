/**
 * bma-executor-sdk for Cloudflare Workers: the whole public API of `mod.ts`, with the Workers
 * transport injected, plus the edge-hosted harness.
 *
 * - `ExecutorClient` dials with `fetch` and `Upgrade: websocket` (`transport/workers.ts`);
 *   a Worker cannot listen on a socket, so `listen()` is unavailable there.
 * - The harness on Workers is the same `Harness` hosted by a Durable Object
 *   ({@linkcode HarnessObject}: its storage is the harness's store, its sockets hibernate, its
 *   alarm runs the deadlines) behind a Worker ({@linkcode createHarnessWorker}) that routes
 *   each request to its object (`harness/workers/README.md`).
 *
 * ```ts
 * // worker.ts (wrangler.toml binds BMA_HARNESS to the class HarnessObject)
 * import { createHarnessWorker, HarnessObject } from "bma-executor-sdk/workers";
 * export { HarnessObject };
 * export default createHarnessWorker();
 * ```
 *
 * @module
 */
export * from "./mod.ts";
export { ExecutorClient } from "./executor/workers.ts";
export { dialWebSocket } from "./transport/workers.ts";
export * from "./harness/workers/mod.ts";
export {
  DurableObjectKvStore,
  type DurableObjectListOptions,
  durableObjectSqlDriver,
  type DurableObjectSqlLike,
  type DurableObjectStoreOptions,
  type DurableObjectStoreStorage,
  type DurableObjectTransactionLike,
  openDurableObjectStore,
} from "./harness/store/durable-object.workers.ts";
