/**
 * The harness on Cloudflare Workers: a Durable Object ({@linkcode HarnessObject}) hosting the
 * same `Harness` as on Node, Deno and Bun over the object's storage and the WebSocket
 * hibernation API, and a Worker ({@linkcode createHarnessWorker}) that routes each request to
 * its object (see `harness/workers/README.md`).
 *
 * ```ts
 * // worker.ts, deployed with wrangler (examples/workers/wrangler.toml)
 * import { createHarnessWorker, HarnessObject } from "bma-executor-sdk/workers";
 * export { HarnessObject };
 * export default createHarnessWorker();
 * ```
 *
 * @module
 */
export { HarnessObject } from "./object.ts";
export {
  BRAIN_API_PREFIX,
  createHarnessWorker,
  type HarnessWorker,
  type HarnessWorkerOptions,
  routeOfToken,
} from "./worker.ts";
export { type HarnessEnv, type HarnessObjectOptions, harnessOptionsFromEnv } from "./config.ts";
export { HarnessVariableError } from "../../http/env-options.ts";
export type {
  DurableObjectIdLike,
  DurableObjectNamespaceLike,
  DurableObjectStateLike,
  DurableObjectStorageLike,
  DurableObjectStubLike,
  WorkersWebSocket,
} from "./types.ts";
