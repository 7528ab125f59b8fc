/**
 * The harness end of the BMA Executor Protocol: serve executors, authenticate them, hold them
 * through reconnects within their lease, assign sessions, call tools, read durable events,
 * open MCP channels, and run the self-hosted token endpoint.
 *
 * The core is runtime-neutral; `harness/node.ts` exports a `Harness` preconfigured with the
 * `ws` server (Node, Deno and Bun).
 *
 * @module
 */
export {
  DEFAULT_HEARTBEAT_INTERVAL_MS,
  DEFAULT_MAX_ARTIFACT_BYTES,
  Harness,
  type HarnessOptions,
  type HarnessServer,
  type ServeOptions,
  type WaitExecutorOptions,
} from "./harness.ts";
export {
  type ExecutorEnd,
  type ExecutorGoneReason,
  ExecutorHandle,
  type MountOptions,
} from "./executor-handle.ts";
export type { ExecutorEvent, ExecutorEventType } from "./context.ts";
export {
  Session,
  type SessionEnd,
  type SessionState,
  type SessionStopOptions,
  type SessionTools,
  type ToolCallOptions,
  type ToolCallRequest,
  type ToolSlot,
  type TypedToolCallOptions,
} from "./session.ts";
export type { ToolCallResult, ToolCallState } from "./tool-call-ledger.ts";
export {
  EventLog,
  type EventLogOptions,
  type SessionEventRecord,
  type SessionEventSink,
} from "./event-log.ts";
export { McpChannel, type McpMessage } from "./mcp-channel.ts";
export {
  type Authenticate,
  type ConnectRequest,
  type CredentialScope,
  type Principal,
} from "./principal.ts";
export {
  DEFAULT_TOKEN_TTL_SECONDS,
  type EnvironmentCredential,
  type ExecutorCredential,
  type MachineCredential,
  type TokenEndpointOptions,
  TokenIssuer,
  type TokenResponse,
} from "./token-endpoint.ts";
export { HmacJwt, type JwtClaims, type JwtVerifyOptions } from "./jwt.ts";
export {
  type ArtifactStore,
  type ArtifactUpload,
  MemoryArtifactStore,
  type StoredArtifact,
} from "./artifacts.ts";
export { type FetchOptions, type WebSocketUpgrader } from "./app.ts";
export {
  ConnectRefusedError,
  ExecutorUnavailableError,
  type ExecutorUnavailableReason,
  HarnessClosedError,
  InsecureServeError,
  McpChannelClosedError,
  NoServerFactoryError,
  SessionEndedError,
  SessionRefusedError,
  type SessionRefusedReason,
  TokenRejectedError,
  type TokenRejectedReason,
  ToolOutcomeUnknownError,
  type ToolOutcomeUnknownReason,
} from "./errors.ts";
