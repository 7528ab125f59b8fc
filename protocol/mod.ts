/**
 * The protocol core, whole: the contract's types, zod schemas and generated predicates, the
 * JSON-RPC peer and its shared handler tables, errors, time, logging, ids and the retry rule.
 * (The other entry points export its curated part, `protocol/core.ts`: types, not schemas.)
 *
 * @module
 */
export * from "./generated/contract.ts";
export * from "./generated/errors.ts";
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
  type AdmissionGate,
  type CallOptions,
  DEFAULT_MAX_DEPTH,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type Disposable,
  type HandlerTable,
  type NotificationHandler,
  Peer,
  PeerHandlers,
  type PeerOptions,
  type ReplyHooks,
  type RequestContext,
  type RequestHandler,
  type SharedNotificationHandler,
  type SharedRequestHandler,
  type ValidationIssue,
} from "./peer.ts";
export {
  isErrorObject,
  isJsonRpcId,
  type JsonRpcFailure,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
  type JsonRpcSuccess,
  utf8Length,
} from "./jsonrpc.ts";
export { hasCapability } from "./capabilities.ts";
export { randomId } from "./ids.ts";
export {
  backoffDelay,
  type BackoffPolicy,
  isRetryable,
  retryDelay,
  retrying,
  type RetryOptions,
  sleep,
} from "./retry.ts";
export { type Clock, ManualClock, systemClock, type TimerHandle } from "./clock.ts";
export {
  isSecretField,
  type LogFields,
  type Logger,
  redact,
  REDACTED,
  redactingLogger,
  redactUrls,
  silentLogger,
} from "./logger.ts";
