/**
 * The protocol core as the SDK's entry points export it: the contract's types (types only: its
 * zod schemas and generated predicates are under `bma-executor-sdk/protocol`), its method and
 * tool names, one error class per contract error code and the local errors, close codes, the
 * JSON-RPC peer, time and logging.
 *
 * @module
 */
export type * from "./generated/contract.ts";
export { CONTRACT_VERSION, methods, PROTOCOLS, TOOL_NAMES } from "./generated/contract.ts";
export {
  CapabilityMissingError,
  CLOSE_CODES,
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
  RETRYABLE_ERROR_CODES,
  TurnInactiveError,
  UnavailableError,
} from "./generated/errors.ts";
export {
  CapabilityNotAdvertisedError,
  ConnectionClosedError,
  FrameTooLargeError,
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
  Peer,
  type PeerOptions,
  type ReplyHooks,
  type RequestContext,
  type RequestHandler,
  type ValidationIssue,
} from "./peer.ts";
export { DEFAULT_MAX_DEPTH } from "./jsonrpc.ts";
export type {
  JsonRpcFailure,
  JsonRpcId,
  JsonRpcMessage,
  JsonRpcNotification,
  JsonRpcRequest,
  JsonRpcResponse,
  JsonRpcSuccess,
} from "./jsonrpc.ts";
export { hasCapability } from "./capabilities.ts";
export { type Clock, ManualClock, systemClock, type TimerHandle } from "./clock.ts";
export { type LogFields, type Logger, REDACTED, redactingLogger, silentLogger } from "./logger.ts";
export type { BackoffPolicy } from "./retry.ts";
