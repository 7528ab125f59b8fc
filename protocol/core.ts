/**
 * The protocol core as the SDK's faces export it: the wire types of the SDK's parameters and
 * results (types only: every wire type, the zod schemas and the generated predicates are under
 * `bma-executor-sdk/protocol`), the method and tool names, one error class per contract error
 * code and the local errors, close codes, the JSON-RPC peer, time and logging.
 *
 * Each name is listed here once, under a `// faces:` line naming the end faces that export it
 * besides the root (`mod.ts` exports every name here; `none`: the root alone, with the agent
 * end's vocabulary and the peer). `npm run gen` (`scripts/gen-faces.ts`) writes those faces'
 * protocol part from these lists, and `/protocol`'s part of them: move a name between the
 * lists, or add one, here.
 *
 * @module
 */
// faces: executor, harness (what both ends name: errors, time, logging, the shared wire types)
export { CONTRACT_VERSION, methods, PROTOCOLS, TOOL_NAMES } from "./generated/contract.ts";
export type {
  Artifact,
  BashInput,
  BashResult,
  Capabilities,
  ContentBlock,
  EditInput,
  EditResult,
  ExecutorInfo,
  GlobInput,
  GlobResult,
  GrepInput,
  GrepResult,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  MethodName,
  NotificationMap,
  NotificationMethod,
  ParamsOf,
  ProtocolVersion,
  ReadInput,
  ReadResult,
  RequestMap,
  RequestMethod,
  ResultOf,
  SessionAssignParams,
  SessionMetadata,
  SessionStatus,
  ToolMap,
  ToolName,
  WriteInput,
  WriteResult,
} from "./generated/contract.ts";
export {
  CapabilityMissingError,
  CloseCode,
  ConflictError,
  ErrorCode,
  ForbiddenError,
  InternalError,
  InvalidParamsError,
  InvalidRequestError,
  MethodNotFoundError,
  NotFoundError,
  ParseError,
  ProtocolMismatchError,
  ResourceExhaustedError,
  TurnInactiveError,
  UnavailableError,
} from "./generated/errors.ts";
export {
  CapabilityNotAdvertisedError,
  ConnectionClosedError,
  FrameTooLargeError,
  InvalidCallOptionError,
  InvalidOutgoingParamsError,
  InvalidResultError,
  type JsonRpcErrorObject,
  LocalError,
  MethodUnavailableError,
  ProtocolError,
  RequestAbortedError,
  RequestTimeoutError,
} from "./errors.ts";
export {
  type CallOptions,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type Disposable,
  type NotificationHandler,
  type ReplyHooks,
  type RequestContext,
  type RequestHandler,
  type ValidationIssue,
} from "./peer.ts";
export type { JsonRpcId } from "./jsonrpc.ts";
export { hasCapability } from "./capabilities.ts";
export { type Clock, ManualClock, systemClock, type TimerHandle } from "./clock.ts";
export { type LogFields, type Logger, REDACTED, redactingLogger, silentLogger } from "./logger.ts";
export type { BackoffPolicy } from "./retry.ts";
export { parseTraceparent, type TraceContext, type Traceparent } from "./trace-context.ts";
export {
  type OtelApi,
  type OtelContext,
  type OtelSpan,
  type OtelSpanContext,
  type OtelTracer,
  type OtelTracerProvider,
  type SpanRole,
  Telemetry,
  type TelemetryOption,
  TracedSpan,
} from "./telemetry.ts";
// faces: executor (the wire types of what only an executor sends or serves)
export type {
  ExecutorNotificationMethod,
  ExecutorRegisterResult,
  ExecutorRequestMethod,
  SessionStopParams,
  ToolDefinition,
  ToolOutputChunk,
  ToolResultParams,
} from "./generated/contract.ts";
// faces: harness (the wire types of what only a harness calls or serves)
export type {
  Ack,
  AgentCustomToolResultParams,
  CustomToolResultResult,
  ErrorInfo,
  ExecutorDrainParams,
  ExecutorDrainResult,
  FsMountResult,
  FsUnmountResult,
  FsView,
  InteractionCancelParams,
  InteractionRequestParams,
  InteractionRequestResult,
  InteractionResponseParams,
  InteractionResponseResult,
  ModelTokenRefreshParams,
  ModelTokenRefreshResult,
  SessionCloseResult,
  SessionEventDeltaParams,
  SessionEventPayload,
  TerminalCloseResult,
  TerminalResizeResult,
  ToolCancelResult,
  ToolOutcome,
  ToolProgressParams,
  ToolsTokenRefreshParams,
  ToolsTokenRefreshResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnInputParams,
  TurnStartParams,
  TurnStartResult,
} from "./generated/contract.ts";
// faces: none (the agent face's wire vocabulary, and the JSON-RPC peer itself)
export type {
  AgentEvent,
  EventDelta,
  InteractionKind,
  InteractionOption,
  InteractionOutcome,
  TurnMetadata,
  TurnOutcome,
} from "./generated/contract.ts";
export { Peer, type PeerOptions } from "./peer.ts";
export { DEFAULT_MAX_DEPTH } from "./jsonrpc.ts";
