/**
 * What the brain's handles call (internal): the operations of the harness's services
 * (executors.ts, sessions.ts, tool-calls.ts implement them), handed to every handle as one
 * {@linkcode HarnessServices}. A handle is a view; these own the rules.
 *
 * Generic over the entries they are given back: a handle gives back only its own entry, so
 * services written over state.ts's entries serve handles typed with the shapes of
 * handle-entries.ts.
 *
 * @module
 */
import type { CallOptions } from "../protocol/peer.ts";
import type {
  ExecutorDrainParams,
  ExecutorDrainResult,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  NotificationMap,
  RequestMap,
  SessionAssignParams,
  ToolCancelResult,
} from "../protocol/generated/contract.ts";
import type { ExecutorEntryShape, SessionEntryShape } from "./handle-entries.ts";
import type {
  SessionEventsOptions,
  SessionStopOptions,
  ToolCallOptions,
  ToolCallRequest,
  TracedCallOptions,
} from "./handle-options.ts";
import type { SessionEnd } from "./lifecycle.ts";
import type { McpChannel } from "./mcp-channel.ts";
import type { SessionEventRecord, ToolCallResult } from "./records.ts";
import type { Terminal, TerminalOptions } from "./terminal.ts";

/** The executor operations of the harness (internal). */
export interface ExecutorOps<E extends ExecutorEntryShape = ExecutorEntryShape> {
  /** The harness's default bma-file service URL. */
  readonly fileServiceUrl: string | undefined;
  request<M extends HarnessRequestMethod>(
    executor: E,
    method: M,
    params: RequestMap[M]["params"],
    options?: TracedCallOptions,
  ): Promise<RequestMap[M]["result"]>;
  /**
   * Runs `send` with `params` carrying the call's trace context, inside a client span `name`
   * with telemetry (what `startTurn` sends through the agent capability).
   */
  traced<P extends object, T>(
    executor: E,
    name: string,
    params: P,
    options: TracedCallOptions,
    send: (params: P, options: CallOptions) => Promise<T>,
  ): Promise<T>;
  notify<M extends HarnessNotificationMethod>(
    executor: E,
    method: M,
    params: NotificationMap[M],
  ): void;
  drain(
    executor: E,
    params: ExecutorDrainParams,
    options: CallOptions,
  ): Promise<ExecutorDrainResult>;
  close(executor: E, reason: string): Promise<void>;
}

/** The session operations of the harness (internal). */
export interface SessionOps<
  E extends ExecutorEntryShape = ExecutorEntryShape,
  S extends SessionEntryShape = SessionEntryShape,
> {
  assign(
    executor: E,
    params: SessionAssignParams,
    options: TracedCallOptions,
  ): Promise<S["view"]>;
  ready(session: S, signal: AbortSignal | undefined): Promise<void>;
  events(
    session: S,
    options: SessionEventsOptions,
  ): AsyncGenerator<SessionEventRecord, void, undefined>;
  mcp(session: S, server: string, options: CallOptions): Promise<McpChannel>;
  terminal(session: S, options: TerminalOptions): Promise<Terminal>;
  stop(session: S, reason: string | undefined, options: SessionStopOptions): Promise<
    SessionEnd
  >;
}

/** The tool-call operations of the harness (internal). */
export interface CallOps<S extends SessionEntryShape = SessionEntryShape> {
  callTool(
    session: S,
    request: ToolCallRequest,
    options: ToolCallOptions,
  ): Promise<ToolCallResult>;
  cancelTool(
    session: S,
    toolCallId: string,
    reason: string | undefined,
    options?: CallOptions,
  ): Promise<ToolCancelResult>;
}

/**
 * Everything a handle hands its operations to: one object per harness (internal). `Agent` is
 * the agent capability's operations (`AgentOps` of handles.ts), set when the harness has one.
 */
export interface HarnessServices<
  E extends ExecutorEntryShape = ExecutorEntryShape,
  S extends SessionEntryShape = SessionEntryShape,
  Agent = unknown,
> {
  readonly executors: ExecutorOps<E>;
  readonly sessions: SessionOps<E, S>;
  readonly calls: CallOps<S>;
  /** Set when the harness was given an agent capability. */
  agent: Agent | undefined;
}
