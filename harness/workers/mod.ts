/**
 * The edge-hosted harness on Cloudflare Workers: a Worker and a Durable Object
 * ({@linkcode HarnessObject}) holding the executors of one environment (or machine) with the
 * WebSocket hibernation API, plus the self-hosted token endpoint and an authenticated HTTP API
 * for the brain (see `harness/workers/README.md`).
 *
 * ```ts
 * // worker.ts, deployed with wrangler (examples/workers/wrangler.toml)
 * import { createHarnessWorker, HarnessObject } from "bma-executor-sdk/workers";
 * export { HarnessObject };
 * export default createHarnessWorker();
 * ```
 *
 * Leases, token deadlines and pending tool calls survive the object being evicted between
 * any two messages: its state is in Durable Object storage and the sockets' attachments, and
 * its deadlines share the object's single alarm.
 *
 * @module
 */
export { HarnessObject } from "./object.ts";
export {
  BRAIN_API_PREFIX,
  CONNECT_PATHS,
  createHarnessWorker,
  type HarnessWorker,
} from "./worker.ts";
export {
  defaultRoute,
  type HarnessEnv,
  type HarnessSettings,
  readSettings,
  type WorkersHarnessOptions,
} from "./config.ts";
export type { BrainErrorBody, ExecutorView, SessionView, ToolCallView } from "./brain.ts";
export type {
  CallFailure,
  ExecutorFeedEvent,
  ExecutorFeedEventType,
  StoredSessionState,
} from "./store.ts";
export type {
  DurableObjectIdLike,
  DurableObjectNamespaceLike,
  DurableObjectStateLike,
  DurableObjectStorageLike,
  DurableObjectStubLike,
  ExecutionContextLike,
  WorkersWebSocket,
} from "./types.ts";
export type { ToolCallResult, ToolCallState } from "../tool-call-ledger.ts";
export type { ConnectRequest, Principal } from "../principal.ts";
