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
  LOCAL_ENVIRONMENT_ID,
  normalizeBaseUrl,
  type SocketFetch,
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
export type { ExecutorListener } from "./listener.ts";
export type { ToolResultLostHandler } from "./result-outbox.ts";
export {
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
  ToolInputSchema,
  ToolOutputSchema,
  ToolProgressUpdate,
  ToolSlot,
  ToolSlots,
  TypedToolDefinition,
  TypedToolHandler,
  TypedToolOutput,
} from "./tool-slots.ts";
export type { BackoffPolicy } from "./timing.ts";
