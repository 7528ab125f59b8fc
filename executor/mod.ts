/**
 * The executor end of the BMA Executor Protocol: {@linkcode ExecutorClient} and what it uses.
 *
 * ```ts
 * import { ExecutorClient, ToolError } from "@bma/executor-sdk/executor/node";
 * import * as z from "zod";
 *
 * const client = new ExecutorClient({
 *   baseUrl: "https://bma.example",
 *   environmentKey: Deno.env.get("BMA_ENVIRONMENT_KEY"),
 *   environmentId: "env_123",
 *   executor: { name: "my-executor", os: "linux", arch: "amd64", version: "0.1.0" },
 * });
 * client.tools.bash.handle(async (input, ctx) => {
 *   if (!input.command) throw new ToolError("empty command");
 *   ctx.progress("running");
 *   return { stdout: "...", stderr: "", exit_code: 0 }; // ctx.signal aborts on tool.cancel
 * });
 * // A tool of your own: advertised with its JSON Schema, input checked, handler typed.
 * client.tool("weather", {
 *   description: "Current weather of a city",
 *   input: z.object({ city: z.string() }),
 *   output: z.object({ celsius: z.number() }),
 * }, ({ city }) => ({ celsius: city.length }));
 * await client.start(); // resolves once registered; reconnects on its own afterwards
 * const info = await client.closed; // why it stopped for good
 * ```
 *
 * This module is portable (web-standard APIs only): pass a `dial` function, or import the
 * client preconfigured for Node, Deno and Bun from `executor/node.ts`.
 *
 * The part of the protocol core an executor names (the wire types of its parameters and
 * results, the error classes, `methods`, `ManualClock`, ...) is re-exported, so one import
 * serves an executor; every wire type and the zod schemas are under `bma-executor-sdk/protocol`.
 *
 * @module
 */
// The protocol core's part an executor names: the lists of protocol/core.ts marked `executor`,
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
  Artifact,
  BackoffPolicy,
  BashInput,
  BashResult,
  CallOptions,
  Capabilities,
  Clock,
  ContentBlock,
  Disposable,
  EditInput,
  EditResult,
  ExecutorInfo,
  ExecutorNotificationMethod,
  ExecutorRegisterResult,
  ExecutorRequestMethod,
  GlobInput,
  GlobResult,
  GrepInput,
  GrepResult,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  JsonRpcErrorObject,
  JsonRpcId,
  LogFields,
  Logger,
  MethodName,
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
  SessionMetadata,
  SessionStatus,
  SessionStopParams,
  SpanRole,
  TelemetryOption,
  TimerHandle,
  ToolDefinition,
  ToolMap,
  ToolName,
  ToolOutputChunk,
  ToolResultParams,
  TraceContext,
  Traceparent,
  ValidationIssue,
  WriteInput,
  WriteResult,
} from "../protocol/core.ts";
// </core-names>
export { ExecutorClient } from "./client.ts";
export type {
  DrainHandler,
  DrainInfo,
  ExecutorCallOptions,
  ExecutorClientOptions,
  FetchFunction,
  SessionAssignHandler,
  SessionStopHandler,
  SocketFetch,
  StopOptions,
  TokenSource,
  TokenSourceResult,
} from "./options.ts";
export type { ClientState, ExecutorClosedInfo, StopReason } from "./connection-loop.ts";
export { LOCAL_ENVIRONMENT_ID } from "./credentials.ts";
export {
  ArtifactUploadError,
  ClientStoppedError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  CredentialRejectedError,
  ExecutorConfigError,
  InvalidTokenSourceResultError,
  NotAHarnessError,
  NotConnectedError,
  TokenExchangeError,
  UnknownSessionError,
} from "./errors.ts";
export { type ArtifactByteStream, type ArtifactUpload, UPLOAD_ATTEMPTS } from "./artifacts.ts";
export type { ExecutorListener } from "./listener.ts";
export type { ExecutorExtensionHost } from "./extension.ts";
export type { ToolResultLostHandler } from "./options.ts";
export {
  ExecutorSession,
  type SessionCleanup,
  type SessionCleanupHook,
  SessionEndedSignal,
  type SessionState,
} from "./sessions.ts";
export {
  DEFAULT_MAX_QUEUED_TOOL_CALLS,
  DEFAULT_MAX_RUNNING_TOOL_CALLS,
  ToolCallAbort,
} from "./tool-calls.ts";
export {
  INLINE_RESULT_BYTES,
  InvalidToolOutputError,
  ToolError,
  type ToolOutput,
  ToolResult,
  type ToolResultInit,
  ToolTimeoutError,
} from "./tool-results.ts";
export type {
  ToolContext,
  ToolHandler,
  ToolInputSchema,
  ToolOutputSchema,
  ToolProgressUpdate,
  ToolSlot,
  ToolSlots,
  TypedToolDefinition,
  TypedToolHandler,
  TypedToolOutput,
} from "./tool-slots.ts";
