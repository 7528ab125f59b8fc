/**
 * The executor end of the BMA Executor Protocol: {@linkcode ExecutorClient} and what it uses.
 *
 * This module is portable (web-standard APIs only): pass a `dial` function, or import the
 * client preconfigured for Node, Deno and Bun from `executor/node.ts`.
 *
 * The protocol core (`methods`, the contract's types and error classes, `ManualClock`, ...) is
 * re-exported, so one import serves an executor.
 *
 * @module
 */
export * from "../protocol/mod.ts";
export {
  type DrainHandler,
  type DrainInfo,
  type ExecutorCallOptions,
  ExecutorClient,
  type ExecutorClientOptions,
  type SessionAssignHandler,
  type SessionStopHandler,
  type StopOptions,
} from "./client.ts";
export type { ClientState, ExecutorClosedInfo, StopReason } from "./connection-loop.ts";
export {
  type ExecutorToken,
  type FetchFunction,
  normalizeBaseUrl,
  type TokenSource,
  type TokenSourceResult,
} from "./credentials.ts";
export {
  ArtifactUploadError,
  ClientStoppedError,
  ConnectionRefusedError,
  CredentialRejectedError,
  ExecutorConfigError,
  NotConnectedError,
  TokenExchangeError,
  UnknownSessionError,
} from "./errors.ts";
export type { ArtifactUpload } from "./artifacts.ts";
export type { ToolResultLostHandler } from "./result-outbox.ts";
export {
  type EndOptions,
  ExecutorSession,
  type SessionCleanup,
  type SessionCleanupHook,
  SessionEndedSignal,
  type SessionState,
} from "./sessions.ts";
export { ToolCallAbort } from "./tool-calls.ts";
export {
  INLINE_RESULT_BYTES,
  InvalidToolOutputError,
  previewText,
  type RenderedResult,
  type TextPreview,
  ToolError,
  type ToolOutput,
  ToolResult,
  type ToolResultInit,
} from "./tool-results.ts";
export type {
  ToolContext,
  ToolHandler,
  ToolProgressUpdate,
  ToolSlot,
  ToolSlots,
} from "./tool-slots.ts";
export type { BackoffPolicy } from "./timing.ts";
