/**
 * Tool calls, harness side: `callTool` checks a call, records it in the ledger (and the store)
 * and sends `tool.call`; `tool.result` settles it. A call whose connection drops before its ack
 * is sent again once the executor is back within its lease (the executor runs a `tool_call_id`
 * once); a call the executor refused fails with its error; a call whose session or executor
 * ends fails with `ToolOutcomeUnknownError`.
 */
import { raceSignal, throwIfAborted } from "../protocol/abort.ts";
import type { CallOptions } from "../protocol/peer.ts";
import {
  CapabilityNotAdvertisedError,
  ConnectionClosedError,
  describeError,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  ProtocolError,
  RequestTimeoutError,
  requireParamsObject,
} from "../protocol/errors.ts";
import { servesTool } from "../protocol/capabilities.ts";
import {
  type Ack,
  isToolCallParams,
  METHOD_SPECS,
  type ToolCallParams,
  type ToolCancelResult,
  type ToolProgressParams,
  type ToolResultParams,
} from "../protocol/generated/contract.ts";
import { NotFoundError } from "../protocol/generated/errors.ts";
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import { randomId } from "../protocol/ids.ts";
import type { Telemetry, TracedSpan } from "../protocol/telemetry.ts";
import { traceContext } from "../protocol/trace-context.ts";
import { ToolOutcomeUnknownError, type ToolOutcomeUnknownReason } from "./errors.ts";
import type { ToolCallOptions, ToolCallRequest } from "./handle-options.ts";
import type { CallOps } from "./handle-services.ts";
import {
  type ExecutorEntry,
  type ExecutorLink,
  sessionEnded,
  type SessionEntry,
  takesNoNewWork,
} from "./state.ts";
import { then } from "./maybe.ts";
import type { Observers } from "./observe.ts";
import type { ToolCallResult } from "./records.ts";
import { request, withTimeout } from "./send.ts";
import { isPromiseLike, keyTextProblem, type MaybePromise } from "./store/store.ts";
import type { ToolCallEntry, ToolCallLedger, ToolCallState } from "./tool-call-ledger.ts";
import { advertisedInputCheck } from "./tool-input.ts";

const TOOL_CALL_PARAMS = METHOD_SPECS.get("tool.call")!.params;

/** A tool call as {@linkcode Harness.toolCall} finds it (a snapshot, with its outcome). */
export interface ToolCallStatus {
  /** The call's id. */
  readonly tool_call_id: string;
  /** Its session. */
  readonly session_id: string;
  /** The executor it went to. */
  readonly executor_id: string;
  /** The tool called; `""` for a call that settled before the harness restarted. */
  readonly tool: string;
  /** Where the call was when it was looked up. */
  readonly state: ToolCallState;
  /** The trace id of the trace context the call carried, if it carried one. */
  readonly trace_id?: string;
  /** Resolves with its result, or rejects as `callTool` would. */
  readonly outcome: Promise<ToolCallResult>;
}

/** What the tool calls need from the harness. */
export interface ToolCallsDeps {
  readonly ledger: ToolCallLedger;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly observers: Observers;
  readonly requestTimeoutMs: number | undefined;
  /** Opens the calls' client spans (`tool.call <name>`); absent without telemetry. */
  readonly telemetry?: Telemetry;
}

/** The harness's tool calls. */
export class ToolCalls implements CallOps<SessionEntry> {
  readonly #ledger: ToolCallLedger;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #observers: Observers;
  readonly #timeoutMs: number | undefined;
  readonly #telemetry: Telemetry | undefined;
  /** What `tool.call` is sent with: checked when the call was made; the harness's timeout. */
  readonly #dispatchOptions: CallOptions;

  /** Caller-given ids whose call is being looked up or recorded: `#claimed`. */
  readonly #claims = new Map<string, Promise<void>>();

  constructor(deps: ToolCallsDeps) {
    this.#ledger = deps.ledger;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#observers = deps.observers;
    this.#timeoutMs = deps.requestTimeoutMs;
    this.#telemetry = deps.telemetry;
    this.#dispatchOptions = withTimeout({ prevalidated: true }, deps.requestTimeoutMs);
  }

  callTool(
    session: SessionEntry,
    request: ToolCallRequest,
    options: ToolCallOptions,
  ): Promise<ToolCallResult> {
    try {
      // An already-aborted call starts nothing (it was recorded and sent, then cancelled).
      throwIfAborted(options.signal, "tool.call");
      requireParamsObject("tool.call", request);
      if (session.state === "ended") throw sessionEnded(session);
      // A fresh random id is in no table: only a caller's own id can name an earlier call.
      if (request.tool_call_id === undefined) {
        return this.#start(session, randomId("call_"), request, options);
      }
      const id = request.tool_call_id;
      const problem = keyTextProblem(id);
      if (problem !== undefined) {
        throw new InvalidOutgoingParamsError("tool.call", [{
          path: ["tool_call_id"],
          message: `tool_call_id ${problem}`,
          code: "custom",
        }]);
      }
      // A call under this id on its way to the store: this one waits for it, then finds it.
      const earlier = this.#claims.get(id);
      if (earlier) return earlier.then(() => this.callTool(session, request, options));
      return this.#claimed(id, (claimed) => {
        // Whatever its session: a call of another one (settled before a restart, in the store
        // only) is refused, never started anew over its stored result.
        const found = this.#ledger.lookup(id);
        if (isPromiseLike(found)) {
          return found.then((entry) => this.#known(session, id, entry, request, claimed));
        }
        return this.#known(session, id, found, request, claimed);
      }, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Runs `start` holding the claim on the caller's `id` until its call is recorded (or refused):
   * a repeat made meanwhile (a brain's retry while the store still writes the first) would find
   * no call yet and record a second under the same id, whose first caller then never heard of
   * it again. The repeat waits, and finds the first.
   */
  #claimed(
    id: string,
    start: (options: ToolCallOptions) => Promise<ToolCallResult>,
    options: ToolCallOptions,
  ): Promise<ToolCallResult> {
    let release!: () => void;
    const claim = new Promise<void>((resolve) => (release = resolve));
    this.#claims.set(id, claim);
    const done = () => {
      if (this.#claims.get(id) !== claim) return;
      this.#claims.delete(id);
      release();
    };
    const onRecorded = options.onRecorded;
    const claimed: ToolCallOptions = {
      ...options,
      onRecorded: () => {
        done();
        onRecorded?.();
      },
    };
    let running: Promise<ToolCallResult>;
    try {
      running = start(claimed);
    } catch (error) {
      done();
      throw error;
    }
    running.catch(done);
    return running;
  }

  cancelTool(
    session: SessionEntry,
    toolCallId: string,
    reason: string | undefined,
    options: CallOptions = {},
  ): Promise<ToolCancelResult> {
    if (session.state === "ended") return Promise.reject(sessionEnded(session));
    return request(
      session.executor,
      "tool.cancel",
      {
        tool_call_id: toolCallId,
        session_id: session.id,
        ...(reason !== undefined ? { reason } : {}),
      },
      options,
      this.#timeoutMs,
    );
  }

  /** A call by id, pending or remembered (in memory, or settled in the store). */
  status(id: string): MaybePromise<ToolCallStatus | undefined> {
    // An id no store can hold names no call.
    if (keyTextProblem(id) !== undefined) return undefined;
    return then(this.#ledger.lookup(id), (entry) =>
      entry && {
        tool_call_id: entry.id,
        session_id: entry.sessionId,
        executor_id: entry.executorId,
        tool: entry.tool,
        state: entry.state,
        outcome: entry.outcome,
        ...(entry.traceId !== undefined ? { trace_id: entry.traceId } : {}),
      });
  }

  /** What every event of a tool call says: when, and which call of which session and executor. */
  #about(
    toolCallId: string,
    sessionId: string,
    executorId: string,
  ): { at: number; toolCallId: string; sessionId: string; executorId: string } {
    return { at: this.#clock.now(), toolCallId, sessionId, executorId };
  }

  /**
   * Sends `tool.call` for an entry now, or leaves it queued until the executor is connected
   * (a settled entry is never sent).
   */
  dispatch(entry: ToolCallEntry, executor: ExecutorEntry): void {
    const connection = executor.connection;
    if (!connection || entry.state === "settled") {
      if (entry.state !== "settled") entry.state = "queued";
      return;
    }
    entry.state = "dispatching";
    entry.dispatchedOn = connection;
    const sending = ++entry.dispatches;
    // The wait for an ack starts at the first sending on each connection (`redispatch` clears it).
    if (Number.isNaN(entry.firstSentAt)) entry.firstSentAt = this.#clock.now();
    if (this.#observers.active) {
      const params = entry.params;
      this.#observers.emit({
        type: "tool.dispatched",
        ...this.#about(entry.id, entry.sessionId, entry.executorId),
        tool: entry.tool,
        input: params.input,
        ...(params.timeout_ms !== undefined ? { timeoutMs: params.timeout_ms } : {}),
        ...(entry.traceId !== undefined ? { traceId: entry.traceId } : {}),
      });
    }
    connection.peer.call("tool.call", entry.params, this.#dispatchOptions).then(
      () => {
        if (entry.dispatches !== sending) return;
        if (entry.state === "dispatching") entry.state = "dispatched";
        // Reported even when the result came first (both in one read): the ack did arrive.
        if (this.#observers.active) {
          this.#observers.emit({
            type: "tool.acknowledged",
            ...this.#about(entry.id, entry.sessionId, entry.executorId),
          });
        }
      },
      (error) => {
        // Settled meanwhile, or already sent again on a newer connection: nothing to do.
        if (entry.state === "settled" || entry.dispatches !== sending) return;
        if (error instanceof ConnectionClosedError) {
          // Sent again after the executor reconnects within its lease.
          entry.state = "queued";
          return;
        }
        if (error instanceof RequestTimeoutError) {
          // The ack is late, not refused (a held link, a busy executor): a duplicate
          // `tool_call_id` is acknowledged without running again, so the call goes out again
          // until it is acknowledged, the connection ends, or its caller stops waiting; or,
          // for a call with `timeout_ms`, until the executor would have ended it had it been
          // acknowledged at once (an executor that heartbeats but never acknowledges).
          const limit = entry.params.timeout_ms;
          const waited = this.#clock.now() - entry.firstSentAt;
          if (limit !== undefined && waited >= limit + (this.#timeoutMs ?? 0)) {
            this.#ledger.fail(
              entry,
              new ToolOutcomeUnknownError(entry.id, entry.sessionId, "dispatch_failed", {
                cause: new Error(
                  `tool.call was not acknowledged within its timeout_ms (${limit} ms) and the ` +
                    `request timeout (${this.#timeoutMs} ms)`,
                ),
              }),
            );
            return;
          }
          entry.dispatchedOn = undefined;
          this.dispatch(entry, executor);
          return;
        }
        if (error instanceof FrameTooLargeError) {
          // Refused before it was sent (the link's frame limit): it never ran, and no sending
          // will fit it. The caller is told so, not that its outcome is unknown.
          this.#ledger.fail(entry, error);
          return;
        }
        // A protocol error means the executor refused the call: it never ran.
        this.#ledger.fail(
          entry,
          error instanceof ProtocolError
            ? error
            : new ToolOutcomeUnknownError(entry.id, entry.sessionId, "dispatch_failed", {
              cause: error,
            }),
        );
      },
    );
  }

  /**
   * The executor registered on `connection`: calls that could not be sent, or whose ack was
   * lost with an earlier connection, go out again (it deduplicates them by `tool_call_id`).
   */
  redispatch(executor: ExecutorEntry, connection: ExecutorLink): void {
    for (const entry of this.#ledger.pending((e) => e.executorId === executor.id)) {
      const unsent = entry.state === "queued" ||
        (entry.state === "dispatching" && entry.dispatchedOn !== connection);
      if (unsent) {
        entry.firstSentAt = NaN;
        this.dispatch(entry, executor);
      }
    }
  }

  /** Applies a `tool.result`, stored before the ack is returned. */
  result(executor: ExecutorEntry, params: ToolResultParams): MaybePromise<Ack> {
    return then(this.#ledger.accept(params, executor.id), (acceptance) => {
      if (acceptance === "unknown") {
        throw new NotFoundError("unknown tool call", { reason: "unknown_tool_call" });
      }
      return acceptance === "duplicate" ? { ok: true, duplicate: true } : { ok: true };
    });
  }

  /** A `tool.progress` notification: to the call's listeners. */
  progress(session: SessionEntry, params: ToolProgressParams): void {
    if (this.#observers.active) {
      this.#observers.emit({
        type: "tool.progress",
        ...this.#about(params.tool_call_id, session.id, session.executor.id),
        progress: params,
      });
    }
    for (const listener of session.progress?.get(params.tool_call_id) ?? []) {
      try {
        listener(params);
      } catch (error) {
        this.#logger.warn("progress listener failed", { error: describeError(error) });
      }
    }
  }

  /**
   * Fails the pending calls of a session (`sessionId`) or an executor (`executorId`) with
   * `ToolOutcomeUnknownError(reason)`. With `record` false (the harness closes) nothing is
   * written: a harness started again on the store takes the calls up.
   */
  failPending(
    match: { sessionId?: string; executorId?: string },
    reason: ToolOutcomeUnknownReason,
    record = true,
  ): void {
    const ledger = this.#ledger;
    const entries = ledger.pending((e) =>
      (match.sessionId === undefined || e.sessionId === match.sessionId) &&
      (match.executorId === undefined || e.executorId === match.executorId)
    );
    for (const entry of entries) {
      ledger.fail(entry, new ToolOutcomeUnknownError(entry.id, entry.sessionId, reason), record);
    }
  }

  #known(
    session: SessionEntry,
    id: string,
    entry: ToolCallEntry | undefined,
    request: ToolCallRequest,
    options: ToolCallOptions,
  ): Promise<ToolCallResult> {
    if (!entry) return this.#start(session, id, request, options);
    if (entry.sessionId !== session.id || entry.executorId !== session.executor.id) {
      throw new InvalidOutgoingParamsError("tool.call", [{
        path: ["tool_call_id"],
        message: "tool_call_id is in use by another session",
        code: "custom",
      }]);
    }
    // A repeat answers the first call's outcome; one naming another tool is another call under
    // a reused id, which would get a result that is not its own. (A call read back settled from
    // the store has no tool name to compare.)
    if (entry.tool !== "" && entry.tool !== request.tool) {
      throw new InvalidOutgoingParamsError("tool.call", [{
        path: ["tool_call_id"],
        message: `tool_call_id is in use by a call of another tool (${entry.tool})`,
        code: "custom",
      }]);
    }
    this.#recorded(options);
    return this.#await(session, entry, options);
  }

  /** Tells the caller its call is recorded (`onRecorded`): a callback that throws is logged. */
  #recorded(options: ToolCallOptions): void {
    const onRecorded = options.onRecorded;
    if (onRecorded === undefined) return;
    try {
      onRecorded();
    } catch (error) {
      this.#logger.warn("onRecorded failed", { error: describeError(error) });
    }
  }

  /** Checks, records and sends a new call. */
  #start(
    session: SessionEntry,
    id: string,
    request: ToolCallRequest,
    options: ToolCallOptions,
  ): Promise<ToolCallResult> {
    // A new call in a session that is stopping would be refused by its executor.
    if (takesNoNewWork(session)) throw sessionEnded(session);
    const executor = session.executor;
    // A peer never receives a method for a capability it did not advertise: tool:<name>.
    if (!servesTool(executor.capabilities, request.tool)) {
      throw new CapabilityNotAdvertisedError("tool.call", `tool:${request.tool}`);
    }
    const params: ToolCallParams = {
      session_id: session.id,
      tool_call_id: id,
      tool: request.tool,
      input: request.input,
    };
    if (request.timeout_ms !== undefined) params.timeout_ms = request.timeout_ms;
    // Two tests on the common path: no trace context given, no telemetry.
    if (options.trace === undefined && this.#telemetry === undefined) {
      return this.#checkAndAdd(session, executor, params, request, options, undefined);
    }
    const span = this.#traced(params, options, executor.id);
    try {
      return this.#checkAndAdd(session, executor, params, request, options, span);
    } catch (error) {
      span?.end(error);
      throw error;
    }
  }

  /**
   * Puts the call's trace context into `params._meta`: the given one, or with telemetry the
   * context of the call's client span (opened here, under the given context or the active one).
   */
  #traced(
    params: ToolCallParams,
    options: ToolCallOptions,
    executorId: string,
  ): TracedSpan | undefined {
    const given = options.trace === undefined ? undefined : traceContext(options.trace);
    const telemetry = this.#telemetry;
    const span = telemetry?.start(`tool.call ${params.tool}`, "client", {
      "bma.tool": params.tool,
      "bma.tool_call_id": params.tool_call_id,
      "bma.session_id": params.session_id,
      "bma.executor_id": executorId,
    }, given);
    const trace = telemetry ? span!.trace : given;
    if (trace) {
      (params as { _meta?: unknown })._meta = trace.tracestate === undefined
        ? { traceparent: trace.traceparent }
        : { traceparent: trace.traceparent, tracestate: trace.tracestate };
    }
    return span;
  }

  /** Checks and records a new call, then sends it (`span`: its client span, ended with it). */
  #checkAndAdd(
    session: SessionEntry,
    executor: ExecutorEntry,
    params: ToolCallParams,
    request: ToolCallRequest,
    options: ToolCallOptions,
    span: TracedSpan | undefined,
  ): Promise<ToolCallResult> {
    // Checked now, not at dispatch: a call queued for a reconnect must not fail later.
    const checked = isToolCallParams(params) ? undefined : TOOL_CALL_PARAMS.safeParse(params);
    if (checked && !checked.success) {
      throw new InvalidOutgoingParamsError(
        "tool.call",
        checked.error.issues.map((i) => ({
          path: i.path.map(String),
          message: i.message,
          code: i.code,
        })),
      );
    }
    const issues = advertisedInputCheck(executor.capabilities, request.tool, this.#logger)?.(
      request.input,
    );
    if (issues) throw new InvalidOutgoingParamsError("tool.call", issues);
    const added = span
      ? this.#telemetry!.within(span, () => this.#ledger.add(params, executor.id))
      : this.#ledger.add(params, executor.id);
    if (span) {
      if (isPromiseLike(added)) added.then((entry) => endWith(span, entry), (e) => span.end(e));
      else endWith(span, added);
    }
    if (!isPromiseLike(added)) {
      this.dispatch(added, executor);
      this.#recorded(options);
      return this.#await(session, added, options);
    }
    return added.then((entry) => {
      // The session may have ended while the store was writing.
      if (session.state === "ended") this.#ledger.fail(entry, sessionEnded(session));
      else this.dispatch(entry, executor);
      this.#recorded(options);
      return this.#await(session, entry, options);
    });
  }

  /** The call's outcome, with progress listening and the caller's abort. */
  #await(
    session: SessionEntry,
    entry: ToolCallEntry,
    options: ToolCallOptions,
  ): Promise<ToolCallResult> {
    const id = entry.id;
    const onProgress = options.onProgress;
    if (onProgress && entry.state !== "settled") {
      const progress = session.progress ??= new Map();
      const listeners = progress.get(id) ?? new Set();
      listeners.add(onProgress);
      progress.set(id, listeners);
      const forget = () => {
        listeners.delete(onProgress);
        if (listeners.size === 0) progress.delete(id);
      };
      entry.outcome.then(forget, forget);
    }
    const signal = options.signal;
    if (!signal) return entry.outcome;
    // Aborting also asks the executor to cancel the call: the wait is not all that stops.
    return raceSignal(entry.outcome, signal, "tool.call", () => {
      if (entry.state !== "settled" && session.state !== "ended") {
        this.cancelTool(session, id, "aborted").catch((error) =>
          this.#logger.debug("tool.cancel after abort failed", { error: describeError(error) })
        );
      }
    });
  }
}

/** Ends a call's client span with its outcome. */
function endWith(span: TracedSpan, entry: ToolCallEntry): void {
  entry.outcome.then((result) => span.endWithOutcome(result), (error) => span.end(error));
}
