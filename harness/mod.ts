/**
 * The harness end of the BMA Executor Protocol: serve executors, authenticate them before the
 * upgrade, hold them through reconnects within their lease, assign sessions, call tools, read
 * durable events, open MCP channels, and run the self-hosted token endpoint.
 *
 * ```ts
 * import { Harness } from "bma-executor-sdk/harness/node"; // the ws server: Node, Deno, Bun
 *
 * // Who may connect, and as whom: here one token bound to one machine (the executor registers
 * // as exec_m_1); or { tokens: { secret, credentials } } for the self-hosted token endpoint.
 * const harness = new Harness({
 *   authenticate: ({ token }) => {
 *     if (token !== "mt_demo") throw new Error("unknown credential"); // HTTP 401
 *     return { scope: "machine", machineId: "m_1", credentialId: "cred_m_1" };
 *   },
 * });
 * const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
 * const executor = await harness.waitExecutor();
 * const session = await executor.assignSession({ session_id: "ses_1" });
 * await session.ready();
 * const result = await session.tools.bash.call({ command: "ls" });
 * await session.stop("done"); // resolves after session.ended
 * // The events accepted, in order; the iteration ends because the session has ended.
 * for await (const record of session.events()) console.log(record.event.type);
 * await harness.close();
 * ```
 *
 * Semantics worth knowing:
 * - `callTool` is idempotent by `tool_call_id`; pending calls survive a reconnect within the
 *   lease (two heartbeat intervals) and fail with `ToolOutcomeUnknownError` when it expires.
 * - A reconnect with `resume` reattaches the sessions it lists; the others end (`lost`).
 * - Serving TCP needs `authenticate` (or `tokens`) unless `insecureNoAuth: true`; `serveUnix`
 *   and `accept` do not. Refusals happen before the upgrade (HTTP 401, 400 for no common
 *   subprotocol, 404 for another path).
 * - A connection that does not register within two heartbeat intervals, or keeps sending
 *   requests before registering, is closed with 1008.
 *
 * The core is runtime-neutral (web-standard APIs only): `serve` uses the injected `server`
 * factory; `harness/node.ts`, `harness/deno.ts` and `harness/bun.ts` export a `Harness`
 * preconfigured with that runtime's server, and `fetch(request, { upgrade })` mounts the
 * harness in a server of your own.
 *
 * The part of the protocol core a harness names (the wire types of its parameters and results,
 * the error classes, `methods`, `ManualClock`, ...) is re-exported, so one import serves a
 * harness; every wire type and the zod schemas are under `bma-executor-sdk/protocol`.
 *
 * @module
 */
// The protocol core's part a harness names: the lists of protocol/core.ts marked `harness`,
// written by `npm run gen` (scripts/gen-faces.ts). Change those lists, not these lines.
// <core-names>
export {
  CapabilityMissingError,
  CapabilityNotAdvertisedError,
  CloseCode,
  ConflictError,
  ConnectionClosedError,
  CONTRACT_VERSION,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  ErrorCode,
  ForbiddenError,
  FrameTooLargeError,
  hasCapability,
  InternalError,
  InvalidCallOptionError,
  InvalidOutgoingParamsError,
  InvalidParamsError,
  InvalidRequestError,
  InvalidResultError,
  LocalError,
  ManualClock,
  MethodNotFoundError,
  methods,
  MethodUnavailableError,
  NotFoundError,
  ParseError,
  parseTraceparent,
  ProtocolError,
  ProtocolMismatchError,
  PROTOCOLS,
  REDACTED,
  redactingLogger,
  RequestAbortedError,
  RequestTimeoutError,
  ResourceExhaustedError,
  silentLogger,
  systemClock,
  Telemetry,
  TOOL_NAMES,
  TracedSpan,
  TurnInactiveError,
  UnavailableError,
} from "../protocol/core.ts";
export type {
  Ack,
  AgentCustomToolResultParams,
  Artifact,
  BackoffPolicy,
  BashInput,
  BashResult,
  CallOptions,
  Capabilities,
  Clock,
  ContentBlock,
  CustomToolResultResult,
  Disposable,
  EditInput,
  EditResult,
  ErrorInfo,
  ExecutorDrainParams,
  ExecutorDrainResult,
  ExecutorInfo,
  FsMountResult,
  FsUnmountResult,
  FsView,
  GlobInput,
  GlobResult,
  GrepInput,
  GrepResult,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  InteractionCancelParams,
  InteractionRequestParams,
  InteractionRequestResult,
  InteractionResponseParams,
  InteractionResponseResult,
  JsonRpcErrorObject,
  JsonRpcId,
  LogFields,
  Logger,
  MethodName,
  ModelTokenRefreshParams,
  ModelTokenRefreshResult,
  NotificationHandler,
  NotificationMap,
  NotificationMethod,
  OtelApi,
  OtelContext,
  OtelSpan,
  OtelSpanContext,
  OtelTracer,
  OtelTracerProvider,
  ParamsOf,
  ProtocolVersion,
  ReadInput,
  ReadResult,
  ReplyHooks,
  RequestContext,
  RequestHandler,
  RequestMap,
  RequestMethod,
  ResultOf,
  SessionAssignParams,
  SessionCloseResult,
  SessionEventDeltaParams,
  SessionEventPayload,
  SessionMetadata,
  SessionStatus,
  SpanRole,
  TelemetryOption,
  TerminalCloseResult,
  TerminalResizeResult,
  TimerHandle,
  ToolCancelResult,
  ToolMap,
  ToolName,
  ToolOutcome,
  ToolProgressParams,
  ToolsTokenRefreshParams,
  ToolsTokenRefreshResult,
  TraceContext,
  Traceparent,
  TurnCancelParams,
  TurnCancelResult,
  TurnInputParams,
  TurnStartParams,
  TurnStartResult,
  ValidationIssue,
  WriteInput,
  WriteResult,
} from "../protocol/core.ts";
// </core-names>
export { Harness, type HarnessServer } from "./harness.ts";
export {
  DEFAULT_HEARTBEAT_INTERVAL_MS,
  DEFAULT_MAX_ARTIFACT_BYTES,
  DEFAULT_MAX_UNREGISTERED_CONNECTIONS,
  DEFAULT_MAX_UNSENT_BYTES,
  type HarnessOptions,
  type ServeOptions,
  type ServeUnixOptions,
  type WaitExecutorOptions,
} from "./harness-options.ts";
export type { HarnessReadiness } from "./readiness.ts";
export {
  type CloseAgentSessionOptions,
  type MountOptions,
  type SessionEventsOptions,
  type SessionStopOptions,
  type ToolCallOptions,
  type ToolCallRequest,
  type TracedCallOptions,
  type TurnInputRequest,
  type TypedToolCallOptions,
} from "./handle-options.ts";
export { type ExecutorEvent, type ExecutorEventType, ExecutorHandle, Session } from "./handles.ts";
export {
  type ExecutorEnd,
  type ExecutorGoneReason,
  type SessionEnd,
  type SessionState,
} from "./lifecycle.ts";
export { type SessionTools, type ToolSlot } from "./tool-slots.ts";
export type {
  AgentExtension,
  AgentExtensionHooks,
  AgentExtensionHost,
  AgentOps,
} from "./extension.ts";
export type { ConnectionSnapshot } from "./connection.ts";
export type { RecoveredLeases } from "./executors.ts";
export type {
  ExecutorArrivedObservation,
  ExecutorCapabilitiesObservation,
  ExecutorDisconnectedObservation,
  ExecutorDrainingObservation,
  ExecutorGoneObservation,
  ExecutorLeaseObservation,
  HarnessObservation,
  HarnessObserver,
  InteractionObservation,
  ObservationBase,
  SessionDeltaObservation,
  SessionEventObservation,
  SessionStateObservation,
  ToolAcknowledgedObservation,
  ToolDispatchedObservation,
  ToolProgressObservation,
  ToolSettledObservation,
} from "./observe.ts";
export type { SchedulerDriver } from "./scheduler.ts";
export { DEFAULT_REMEMBER_ENDED_SESSIONS } from "./sessions.ts";
export type { DialedExecutorLink, HarnessDialOptions } from "./dial-link.ts";
export {
  Terminal,
  TerminalBusyError,
  type TerminalOptions,
  type TerminalReadOptions,
} from "./terminal.ts";
export type { ToolCallResult, ToolCallState } from "./tool-call-ledger.ts";
export type { ToolCallStatus } from "./tool-calls.ts";
export {
  DEFAULT_MAX_SESSION_EVENT_BYTES,
  DEFAULT_MAX_SESSION_EVENTS,
  type SessionEventRecord,
  type SessionEventSink,
} from "./event-log.ts";
export { McpChannel, type McpMessage } from "./mcp-channel.ts";
export type { Authenticate, ConnectRequest, CredentialScope, Principal } from "./principal.ts";
export {
  DEFAULT_TOKEN_TTL_SECONDS,
  type EnvironmentCredential,
  type ExecutorCredential,
  InvalidCredentialError,
  type MachineCredential,
  type TokenEndpointOptions,
  type TokenResponse,
} from "../http/token-endpoint/token-issuer.ts";
export {
  type ArtifactStore,
  ArtifactStoreFullError,
  type ArtifactUpload,
  DEFAULT_MAX_STORED_ARTIFACT_BYTES,
  MemoryArtifactStore,
  type MemoryArtifactStoreOptions,
  type StoredArtifact,
} from "./artifacts.ts";
export {
  ARTIFACT_CHUNK_BYTES,
  StoreArtifactStore,
  type StoreArtifactStoreOptions,
} from "./store/store-artifacts.ts";
export type { FetchOptions, WebSocketUpgrader } from "./app.ts";
export { brainApi, type BrainApiOptions } from "../http/brain-api/brain-api.ts";
export {
  healthRoutes,
  HEALTHZ_PATH,
  type ReadinessSource,
  READYZ_PATH,
} from "../http/health/health.ts";
export type {
  BrainError,
  BrainExecutorView,
  BrainSessionView,
  BrainToolCallView,
} from "../http/brain-api/views.ts";
export type { ApiErrorBody } from "../http/shared/api-error.ts";
export {
  type HarnessMetricsSnapshot,
  type HistogramSnapshot,
  METRICS_DURATION_BUCKETS,
  type ToolCallOutcomeLabel,
} from "./metrics.ts";
export {
  MetricsLabelError,
  OPENMETRICS_CONTENT_TYPE,
  type OpenMetricsOptions,
  openMetricsText,
} from "../http/metrics/openmetrics.ts";
export type { MetricsEndpointOptions } from "../http/metrics/endpoint.ts";
export {
  type Authorize,
  bearerAuthorize,
  MIN_TOKEN_LENGTH,
  TokenTooShortError,
} from "../http/shared/bearer.ts";
export {
  meterHarness,
  type OtelBatchObservableResult,
  type OtelInstrumentOptions,
  type OtelMeter,
} from "../http/metrics/otel.ts";
export {
  DEFAULT_MAX_STREAM_QUEUE_BYTES,
  type Inspector,
  inspector,
  type InspectorOptions,
} from "../http/inspector/inspector.ts";
export { randomInspectorToken } from "../http/inspector/auth.ts";
export { DEFAULT_INSPECTOR_LIMITS, type InspectorLimits } from "../http/inspector/model.ts";
export {
  ConnectRefusedError,
  ExecutorUnavailableError,
  type ExecutorUnavailableReason,
  HarnessClosedError,
  HarnessConfigError,
  InsecureServeError,
  McpChannelClosedError,
  NoAgentPlatformError,
  NoDialerError,
  NoServerFactoryError,
  SessionEndedError,
  SessionRefusedError,
  type SessionRefusedReason,
  StreamBacklogError,
  TokenRejectedError,
  type TokenRejectedReason,
  ToolOutcomeUnknownError,
  type ToolOutcomeUnknownReason,
} from "./errors.ts";
export {
  checkKey,
  checkList,
  type CheckOp,
  compareKeys,
  type DeleteOp,
  type DeletePrefixOp,
  encodeValue,
  expectedText,
  type HarnessStore,
  InvalidStoreRequestError,
  type InvalidStoreRequestReason,
  type ListOptions,
  type MaybePromise,
  prefixEnd,
  type PutOp,
  StoreBusyError,
  StoreClosedError,
  StoreConditionError,
  type StoreOp,
  StoreUnavailableError,
} from "./store/store.ts";
export {
  DEFAULT_STORE_RENEW_MS,
  type HolderIdentity,
  STORE_FORMAT,
  StoreFencedError,
  StoreFormatError,
  StoreHeldError,
  type StoreHolderRecord,
  StoreLockedError,
} from "./store/claim.ts";
export { MemoryHarnessStore, type MemoryHarnessStoreOptions } from "./store/memory.ts";
export {
  DEFAULT_STORE_TABLE,
  type PreparedStatementLike,
  type PreparingDatabaseLike,
  preparingDriver,
  type SqlDriver,
  SqlHarnessStore,
  type SqlHarnessStoreOptions,
  SqliteDriverUnavailableError,
  SqliteStoreDamagedError,
  type SqliteStoreOptions,
  type SqliteSynchronous,
  type SqlRow,
  type SqlValue,
} from "./store/sql.ts";
