/**
 * Sessions, harness side: the harness's live sessions and the operations on them, each done by
 * the part whose job it is — assignment and readiness (session-assign.ts), durable events
 * (session-events.ts), MCP channels (session-mcp.ts), terminals (session-terminals.ts), stop
 * and the end, by `session.ended`, by the executor's lease or by a reconnect that did not resume
 * it (session-end.ts), the store's records (session-records.ts) and what is read back from them
 * (session-recovery.ts). Each state change is written to the store (`ready` before its ack), so
 * a harness started again on the store holds the same live sessions.
 *
 * Ended sessions are remembered in the store (their record and events) until `rememberEnded`
 * newer ones have ended.
 */
import type {
  Ack,
  SessionAssignParams,
  SessionEventParams,
  SessionEventResult,
  SessionStatusParams,
  TerminalOutputParams,
} from "../protocol/generated/contract.ts";
import type { Clock } from "../protocol/clock.ts";
import type { CallOptions } from "../protocol/peer.ts";
import type { JsonRpcId } from "../protocol/jsonrpc.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Telemetry } from "../protocol/telemetry.ts";
import type { ToolOutcomeUnknownReason } from "./errors.ts";
import type { SessionEventSink } from "./event-log.ts";
import type {
  SessionEventsOptions,
  SessionStopOptions,
  TracedCallOptions,
} from "./handle-options.ts";
import type { SessionOps } from "./handle-services.ts";
import type { Session } from "./handles.ts";
import type { SessionState } from "./lifecycle.ts";
import type { McpChannel } from "./mcp-channel.ts";
import type { HarnessMetrics } from "./metrics.ts";
import type { Observers } from "./observe.ts";
import type { SessionEventRecord } from "./records.ts";
import type { Scheduler } from "./scheduler.ts";
import { SessionAssignments } from "./session-assign.ts";
import { type EndRecord, SessionEnds } from "./session-end.ts";
import { openMcpChannel } from "./session-mcp.ts";
import { SessionRecords } from "./session-records.ts";
import { SessionRecovery } from "./session-recovery.ts";
import { openTerminal, resumeTerminals, terminalOutput } from "./session-terminals.ts";
import type { EntryServices, ExecutorEntry, SessionEntry } from "./state.ts";
import { type HarnessStore, isPromiseLike, type MaybePromise } from "./store/store.ts";
import type { Terminal, TerminalOptions } from "./terminal.ts";
import type { ToolCalls } from "./tool-calls.ts";

export type { EndRecord } from "./session-end.ts";

/** The default number of ended sessions remembered in the store: 1,000. */
export const DEFAULT_REMEMBER_ENDED_SESSIONS = 1_000;

/** What the sessions need from the harness. */
export interface SessionsDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly scheduler: Scheduler;
  readonly observers: Observers;
  readonly calls: ToolCalls;
  readonly services: EntryServices;
  readonly requestTimeoutMs: number | undefined;
  /** Where accepted events go besides the store (the user's sink, the agent capability). */
  readonly eventSink: SessionEventSink | undefined;
  readonly maxSessionEvents: number | undefined;
  readonly maxSessionEventBytes: number | undefined;
  /** Ended sessions remembered in the store. */
  readonly rememberEnded: number;
  /** Opens the client span of each `session.assign`; absent without telemetry. */
  readonly telemetry?: Telemetry;
  /** Counts the accepted durable events. */
  readonly metrics?: HarnessMetrics;
}

/**
 * The harness's sessions: what the handles and the harness's handlers call, handed to the part
 * that does it (one object, so the callers need not know how the work is divided).
 */
export class Sessions implements SessionOps<ExecutorEntry, SessionEntry> {
  /** Every live session of the harness, by id (ids are unique across executors). */
  readonly live = new Map<string, SessionEntry>();
  readonly #deps: SessionsDeps;
  readonly #assignments: SessionAssignments;
  readonly #ends: SessionEnds;
  readonly #recovery: SessionRecovery;
  /** The `session.ready` writes not yet durable, by session. */
  readonly #readyWrites = new WeakMap<SessionEntry, Promise<boolean>>();

  constructor(deps: SessionsDeps) {
    this.#deps = deps;
    const records = new SessionRecords(deps);
    this.#ends = new SessionEnds(deps, this.live, records);
    this.#assignments = new SessionAssignments(deps, this.live, records, this.#ends);
    this.#recovery = new SessionRecovery(deps, {
      live: this.live,
      records,
      assignments: this.#assignments,
      ends: this.#ends,
    });
  }

  // ---- creation and readiness (session-assign.ts) ----------------------------------------------

  assign(
    executor: ExecutorEntry,
    params: SessionAssignParams,
    options: TracedCallOptions,
  ): Promise<Session> {
    return this.#assignments.assign(executor, params, options);
  }

  /** The live session `id` of `executor`, or a new one opened by an agent turn. */
  open(executor: ExecutorEntry, id: string): SessionEntry {
    return this.#assignments.open(executor, id);
  }

  ready(session: SessionEntry, signal: AbortSignal | undefined): Promise<void> {
    return this.#assignments.ready(session, signal);
  }

  /** `session.ready` arrived: written before the ack; whether it was a repeat. */
  markReady(session: SessionEntry): MaybePromise<boolean> {
    // A repeat that comes while the first is being written (the executor resent it after its
    // request timed out) is answered once that write is: acknowledged if it is durable, refused
    // as the first is if it fails. The session is `ready` already, so it would be acknowledged
    // at once, for a state the store may never hold.
    const writing = this.#readyWrites.get(session);
    if (writing !== undefined) return writing.then(() => true);
    const marked = this.#assignments.markReady(session);
    if (!isPromiseLike(marked)) return marked;
    const written = Promise.resolve(marked);
    this.#readyWrites.set(session, written);
    const settle = () => {
      if (this.#readyWrites.get(session) === written) this.#readyWrites.delete(session);
    };
    written.then(settle, settle);
    return written;
  }

  /** A `session.status` notification. */
  status(session: SessionEntry, params: SessionStatusParams): void {
    this.#assignments.status(session, params);
  }

  // ---- events (the session's log: session-events.ts) -------------------------------------------

  /** A `session.event` request: stored before the ack is returned. */
  appendEvent(
    session: SessionEntry,
    params: SessionEventParams,
    rpcId: JsonRpcId,
    frameLength: number,
  ): MaybePromise<SessionEventResult> {
    return session.log.append(params, rpcId, frameLength);
  }

  events(
    session: SessionEntry,
    options: SessionEventsOptions,
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    return session.log.read(options);
  }

  // ---- MCP channels and terminals (session-mcp.ts, session-terminals.ts) -----------------------

  mcp(session: SessionEntry, server: string, options: CallOptions): Promise<McpChannel> {
    return openMcpChannel(session, server, options, this.#deps.requestTimeoutMs, this.#deps.logger);
  }

  terminal(session: SessionEntry, options: TerminalOptions): Promise<Terminal> {
    return openTerminal(session, options, this.#deps.requestTimeoutMs, this.#deps.logger);
  }

  /** A `terminal.output` notification. */
  terminalOutput(session: SessionEntry, params: TerminalOutputParams): void {
    terminalOutput(session, params);
  }

  /** The executor reconnected and resumed `ids`: lossy output sent meanwhile is read back. */
  resumed(executor: ExecutorEntry, ids: readonly string[]): void {
    resumeTerminals(executor, ids);
  }

  // ---- stop and the end (session-end.ts) -------------------------------------------------------

  /** `session.ended` from the executor, acknowledged once its end is stored. */
  executorEnded(
    executor: ExecutorEntry,
    sessionId: string,
    reason: string | undefined,
  ): MaybePromise<Ack> {
    return this.#ends.executorEnded(executor, sessionId, reason);
  }

  /** Stops the session (`session.stop`) and waits for `session.ended`. */
  stop(
    session: SessionEntry,
    reason: string | undefined,
    options: SessionStopOptions,
  ): Promise<{ reason: string }> {
    return this.#ends.stop(session, reason, options);
  }

  /** Waits for `session.ended` after a stop or a close, at most `waitMs` (then ends it). */
  awaitEnd(session: SessionEntry, waitMs: number, reason: string, state?: SessionState): void {
    this.#ends.awaitEnd(session, waitMs, reason, state);
  }

  /** Ends a session; `record` says what the store keeps (see {@linkcode EndRecord}). */
  end(
    session: SessionEntry,
    reason: string,
    toolReason: ToolOutcomeUnknownReason,
    record?: EndRecord,
  ): void {
    this.#ends.end(session, reason, toolReason, record);
  }

  /** A reconnect did not resume these sessions of `executor`: they end (`lost`). */
  lost(executor: ExecutorEntry, keep: ReadonlySet<string>): string[] {
    return this.#ends.lost(executor, keep);
  }

  // ---- the store (session-recovery.ts) ---------------------------------------------------------

  /** Reads the live sessions a previous run of the harness left in the store back. */
  recover(executors: ReadonlyMap<string, ExecutorEntry>): MaybePromise<void> {
    return this.#recovery.recover(executors);
  }

  /** A session by id: a live one, else an ended one the store still remembers. */
  find(
    id: string,
    executors: ReadonlyMap<string, ExecutorEntry>,
  ): MaybePromise<Session | undefined> {
    return this.#recovery.find(id, executors);
  }
}
