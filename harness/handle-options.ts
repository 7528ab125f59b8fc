/**
 * What the brain's handles take (`ExecutorHandle`, `Session`: handles.ts): the options of their
 * operations and the requests they send.
 *
 * One spelling each: an option of the SDK is camelCase (`timeoutMs`, `toolCallId`), and the SDK
 * maps it to the wire field (`timeout_ms`, `tool_call_id`); a request is the contract's own params
 * (snake_case, as on the wire), less what the harness fills in.
 *
 * @module
 */
import type { CallOptions } from "../protocol/peer.ts";
import type { TraceContext } from "../protocol/trace-context.ts";
import type {
  ToolCallParams,
  ToolProgressParams,
  TurnInputParams,
} from "../protocol/generated/contract.ts";

/** Options of `ExecutorHandle.mount`. */
export interface MountOptions {
  /** The bma-file service URL. Default: the harness's `fileServiceUrl`. */
  serviceUrl?: string;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** Options of `ExecutorHandle.closeAgentSession`. */
export interface CloseAgentSessionOptions {
  /** Sent in `session.close`. */
  reason?: string;
  /** Stops waiting (rejects with `RequestAbortedError`). */
  signal?: AbortSignal;
  /**
   * How long to wait for `session.ended` after the executor accepted the close; then the harness
   * ends the session itself (reason `close_timeout`). Default 60 s.
   */
  timeoutMs?: number;
}

/** Options of a request the harness sends, with the trace context it carries. */
export interface TracedCallOptions extends CallOptions {
  /**
   * The W3C trace context the request carries (`params._meta.traceparent` and `tracestate`);
   * an invalid `traceparent` is ignored, a `tracestate` beyond its bounds dropped. With the
   * harness's `telemetry`, `session.assign` and `turn.start` carry their client span's context
   * instead, that span a child of this one (default: of the active context).
   */
  trace?: TraceContext;
}

/** A `turn.input` as `sendTurnInput` takes it: `input_id` is generated when absent. */
export type TurnInputRequest = Omit<TurnInputParams, "input_id"> & { input_id?: string };

/**
 * A tool call as `callTool` takes it: the contract's `tool.call` params without `session_id`
 * (the session's own); `tool_call_id`, the idempotency key, is generated when absent. For a
 * built-in tool `input` must match the tool's input schema, for a tool of the executor's own the
 * input schema it advertised (`capabilities.tool_definitions`).
 */
export interface ToolCallRequest extends Omit<ToolCallParams, "session_id" | "tool_call_id"> {
  /** The idempotency key: calling again with the same id returns the same outcome. */
  tool_call_id?: string;
}

/** Options of a tool call. */
export interface ToolCallOptions {
  /** Stops waiting (rejects with `RequestAbortedError`) and asks the executor to cancel the call. */
  signal?: AbortSignal;
  /** Receives the call's `tool.progress` notifications (lossy). */
  onProgress?: (progress: ToolProgressParams) => void;
  /**
   * The W3C trace context the call carries to the executor (`params._meta`): its handler gets
   * it, and the commands it runs see it as `TRACEPARENT`. An invalid `traceparent` is ignored.
   * With the harness's `telemetry`, the call carries the context of its client span
   * (`tool.call <name>`), a child of this one (default: of the active context).
   */
  trace?: TraceContext;
  /**
   * Called once the call is recorded: in the harness's store when it has one (from then on a
   * harness started again on the store knows the call), in memory otherwise; at once for a repeat
   * of a call the harness knows. A service that answers "accepted" before the result (the brain
   * API's 202) answers after it.
   */
  onRecorded?: () => void;
}

/** Options of a typed tool slot's `call` (`session.tools.<name>.call`). */
export interface TypedToolCallOptions extends ToolCallOptions {
  /** The idempotency key (`tool_call_id` on the wire); generated when absent. */
  toolCallId?: string;
  /**
   * The executor ends the call with outcome `timed_out` after this long (`timeout_ms` on the
   * wire). Default: the executor's.
   */
  timeoutMs?: number;
}

/** Options of `Session.stop`: two different times, one for the executor and one for the harness. */
export interface SessionStopOptions {
  /**
   * On the executor: the time between SIGTERM and SIGKILL for the session's processes
   * (`grace_ms` of `session.stop`). Default: the executor's (5 s).
   */
  graceMs?: number;
  /** Stops waiting for `session.ended` (rejects with `RequestAbortedError`). */
  signal?: AbortSignal;
  /**
   * On the harness: how long to wait for `session.ended` after the executor accepted the stop;
   * then the harness ends the session on its own (reason `stop_timeout`). Default: `graceMs`
   * (or 5 s) plus 60 s.
   */
  timeoutMs?: number;
}

/** Options of `Session.events`. */
export interface SessionEventsOptions {
  /** The 0-based position to start at (a reader's own count of records it has taken). */
  from?: number;
  /** Ends the iteration (quietly). */
  signal?: AbortSignal;
}
