/**
 * Serving `tool.call` and `tool.cancel`: refuse what cannot run before any ack (a tool not
 * served, input its schema refuses, an unknown session), acknowledge the rest at once, run the
 * handler, and report its outcome with `tool.result` through the result outbox. A
 * `tool_call_id` runs at most once per client.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";
import type {
  Ack,
  Artifact,
  ContentBlock,
  ToolCallParams,
  ToolCancelParams,
  ToolCancelResult,
  ToolOutcome,
  ToolProgressParams,
  ToolResultParams,
} from "../protocol/generated/contract.ts";
import {
  CapabilityMissingError,
  ConflictError,
  NotFoundError,
  ResourceExhaustedError,
} from "../protocol/generated/errors.ts";
import { ConnectionClosedError } from "../protocol/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type { ReplyHooks } from "../protocol/peer.ts";
import { RecentIds, RecentMap } from "../protocol/bounded-set.ts";
import { echoed } from "../protocol/issues.ts";
import type { Telemetry, TracedSpan } from "../protocol/telemetry.ts";
import { type TraceContext, traceContext } from "../protocol/trace-context.ts";
import type { ArtifactUpload } from "./artifacts.ts";
import { NotConnectedError } from "./errors.ts";
import type { SecretScrubber } from "./secrets.ts";
import type { ExecutorSession, SessionTable } from "./sessions.ts";
import { describeError } from "./timing.ts";
import {
  checkBlocks,
  InvalidToolOutputError,
  type RenderedResult,
  renderToolOutput,
  type ResultOutbox,
  ToolError,
  ToolTimeoutError,
} from "./tool-results.ts";
import {
  checkedInput,
  checkedOutput,
  type ServedTool,
  type ToolContext,
  type ToolProgressUpdate,
} from "./tool-slots.ts";

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === "function";
}

/** How a handler's thrown value is reported; read defensively (a Proxy's trap may throw). */
function thrownKind(error: unknown): "timeout" | "tool" | "invalid" | "other" {
  try {
    if (error instanceof ToolTimeoutError) return "timeout";
    if (error instanceof ToolError) return "tool";
    if (error instanceof InvalidToolOutputError) return "invalid";
  } catch {
    // A value whose prototype cannot be read is no error of the SDK's.
  }
  return "other";
}

/**
 * The text of a handler's thrown value: an Error's message (or name), another value's string
 * form. Read defensively: a getter, `toString` or Proxy trap that throws, or a value with no
 * string form (`Object.create(null)`), gives a fixed text instead.
 */
function thrownText(error: unknown): string {
  try {
    if (!(error instanceof Error)) return String(error);
    const text = error.message || error.name;
    if (typeof text === "string") return text;
  } catch {
    // Described below.
  }
  return "the handler threw a value that cannot be described";
}

/** A handler's value that cannot be read (a getter or Proxy trap throws) or serialized. */
function unreadable(tool: string): InvalidToolOutputError {
  return new InvalidToolOutputError(
    `the ${tool} handler returned a result that cannot be read or serialized as JSON`,
  );
}

/**
 * How many finished call ids are remembered, at least, to recognize duplicates (up to twice as
 * many are held: see {@linkcode RecentIds}).
 */
const REMEMBERED_CALLS = 25_000;

/**
 * Tool handlers running at once by default: each `bash` call holds a child process and its
 * pipes, and ten thousand at once exhausted a machine's file descriptors.
 */
export const DEFAULT_MAX_RUNNING_TOOL_CALLS = 256;

/** Tool calls waiting for a slot by default, beyond which `tool.call` is refused (-32009). */
export const DEFAULT_MAX_QUEUED_TOOL_CALLS = 10_000;

/** Why a call's signal was aborted. */
export class ToolCallAbort extends Error {
  /** The outcome the abort reports. */
  readonly outcome: "canceled" | "timed_out";
  /** The outcome to report, and why the call was aborted. */
  constructor(outcome: "canceled" | "timed_out", why: string) {
    super(why);
    this.name = "ToolCallAbort";
    this.outcome = outcome;
  }
}

/**
 * How a call is aborted. Its AbortSignal is created only when the handler reads `ctx.signal`:
 * most handlers never do, and an AbortSignal is the costliest object a call would otherwise
 * allocate. The runner itself listens through {@linkcode CallAbort.onAbort}.
 */
class CallAbort {
  aborted = false;
  reason: unknown = undefined;
  #controller: AbortController | undefined;
  #listener: (() => void) | undefined;

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.aborted) this.#controller.abort(this.reason);
    }
    return this.#controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.#controller?.abort(reason);
    const listener = this.#listener;
    this.#listener = undefined;
    listener?.();
  }

  /** Calls `listener` once when aborted (at once if it is already). One listener. */
  onAbort(listener: () => void): void {
    if (this.aborted) listener();
    else this.#listener = listener;
  }
}

/**
 * What a handler is told: its call's own (an object of a class, so the getters live on the
 * prototype; the lazy `signal` is made only when read).
 */
class CallContext implements ToolContext {
  readonly progress: (update: string | ToolProgressUpdate) => void;
  readonly #call: RunningCall;

  constructor(call: RunningCall, progress: (update: string | ToolProgressUpdate) => void) {
    this.progress = progress;
    this.#call = call;
  }

  get sessionId(): string {
    return this.#call.params.session_id;
  }
  get toolCallId(): string {
    return this.#call.params.tool_call_id;
  }
  get tool(): string {
    return this.#call.params.tool;
  }
  get timeoutMs(): number | undefined {
    return this.#call.params.timeout_ms;
  }
  get session(): ExecutorSession {
    return this.#call.session;
  }
  get trace(): TraceContext | undefined {
    return this.#call.trace;
  }
  get signal(): AbortSignal {
    return this.#call.abort.signal;
  }
}

interface RunningCall {
  readonly params: ToolCallParams;
  /** What the handler is given: `params.input`, or its parse by the tool's input schema. */
  readonly input: unknown;
  readonly session: ExecutorSession;
  readonly abort: CallAbort;
  /** When it was acknowledged (the clock's ms), for its log line; 0 when calls are not logged. */
  readonly startedAt: number;
  /** Its trace context (see {@linkcode ToolContext.trace}). */
  readonly trace: TraceContext | undefined;
  /** Its server span, with telemetry. */
  readonly span: TracedSpan | undefined;
  /** Reporting: the handler is done; the result is on its way. */
  reporting: boolean;
  /** Finished: the result is delivered (or given up on). */
  done: boolean;
  /** Who waits for it to finish (made only when someone does). */
  waiters: (() => void)[] | undefined;
  /** Its handler holds one of the runner's `maxRunning` slots. */
  holdsSlot: boolean;
  /** Waiting for a slot, since this time (the clock's ms); undefined once started. */
  queuedAt: number | undefined;
  /** Its `timeout_ms` while it waits for a slot. */
  queuedTimer: TimerHandle | undefined;
}

/** A call acknowledged while every slot was taken. */
interface WaitingCall {
  readonly call: RunningCall;
  readonly served: ServedTool;
  readonly set: Set<RunningCall>;
}

/** Resolves once the call has finished and reported. */
function finished(call: RunningCall): Promise<void> {
  if (call.done) return Promise.resolve();
  return new Promise((resolve) => (call.waiters ??= []).push(resolve));
}

/** How the client's tools are served now. */
export interface ServedTools {
  /** How a tool is served, or undefined when it is not served (or withdrawn). */
  servedTool(tool: string): ServedTool | undefined;
}

/** What the runner needs. */
export interface ToolCallRunnerDeps {
  clock: Clock;
  logger: Logger;
  /**
   * Where each call's end is logged (info: id, tool, outcome, duration; never its input), and
   * its refusal; absent when nobody listens, so the hot path skips the clock and the record.
   */
  callLog: Logger | undefined;
  scrubber: SecretScrubber;
  sessions: SessionTable;
  results: ResultOutbox;
  tools: ServedTools;
  /** Where `tool.progress` goes; throws while not connected. */
  progress: { notify(method: "tool.progress", params: ToolProgressParams): boolean };
  /** Where large output goes, when an artifact endpoint is `available`. */
  artifacts: { readonly available: boolean; upload(upload: ArtifactUpload): Promise<Artifact> };
  inlineBytes: number;
  /** The grace period of a one-shot session's end, which follows its call's report. */
  sessionGraceMs: number;
  /** Opens each call's server span (`tool.call <name>`); absent without telemetry. */
  telemetry?: Telemetry;
  /** Most handlers running at once; later calls wait for a slot, first come first served. */
  maxRunning: number;
  /** Most calls waiting for a slot; beyond it `tool.call` is refused with -32009. */
  maxQueued: number;
}

/** Runs the tool calls of one client. */
export class ToolCallRunner {
  readonly #deps: ToolCallRunnerDeps;
  /** Uploads an artifact; absent when no endpoint is configured. */
  readonly #upload: ((upload: ArtifactUpload) => Promise<Artifact>) | undefined;
  readonly #running = new Map<string, RunningCall>();
  /**
   * Ids of calls that ran under this executor id: at least the most recent
   * {@linkcode REMEMBERED_CALLS}.
   */
  #finished = new RecentIds<string>(REMEMBERED_CALLS);
  /** Whose session each finished call was (`#finished` answers the fast miss first). */
  #finishedSessions = new RecentMap<string, string>(REMEMBERED_CALLS);
  /** Calls per session that have not finished reporting. */
  readonly #perSession = new Map<string, Set<RunningCall>>();
  /** Sessions whose end aborts their calls (one listener per session, not one per call). */
  readonly #watched = new WeakSet<ExecutorSession>();
  /** Calls whose handler holds a slot. */
  #slotsHeld = 0;
  /** Calls whose handler has ended, their result being delivered. */
  #reportingCalls = 0;
  /**
   * Calls waiting for a slot, oldest first from `#waitingHead`; an entry whose call was aborted
   * while it waited has started already and is skipped.
   */
  #waiting: (WaitingCall | undefined)[] = [];
  #waitingHead = 0;
  /** Taking waiting calls into free slots (a handler that ends at once frees its slot inside). */
  #admitting = false;

  constructor(deps: ToolCallRunnerDeps) {
    this.#deps = deps;
    const { artifacts } = deps;
    this.#upload = artifacts.available ? (upload) => artifacts.upload(upload) : undefined;
  }

  /**
   * Forgets which calls ran: the executor registered under a new id (the harness did not resume
   * it), and a `tool_call_id` names a call only within one harness's dealings with one executor.
   * A harness that starts again without its store numbers its calls afresh; remembered, its
   * first calls would be answered as duplicates and never run, their results never sent.
   */
  forgetFinished(): void {
    this.#finished = new RecentIds<string>(REMEMBERED_CALLS);
    this.#finishedSessions = new RecentMap<string, string>(REMEMBERED_CALLS);
  }

  /** Calls whose handler runs or whose result is being delivered. */
  get active(): number {
    return this.#running.size;
  }

  /**
   * Serves `tool.call`: throws the refusal, or acknowledges and starts the call once the
   * acknowledgement is on the wire (`reply`: the request's after-reply hooks).
   */
  call(params: ToolCallParams, reply: ReplyHooks): Ack {
    const id = params.tool_call_id;
    const log = this.#deps.callLog;
    if (this.#running.has(id) || this.#finished.has(id)) {
      if (!this.#sameSession(id, params.session_id)) {
        // Acknowledged as a duplicate, it would never run and no result would ever come.
        throw this.#refused(
          params,
          new ConflictError("tool_call_id names a call of another session", {
            reason: "tool_call_id_reused",
          }),
        );
      }
      log?.debug("tool call repeated: answered as a duplicate", {
        tool_call_id: id,
        tool: params.tool,
      });
      return { ok: true, duplicate: true };
    }
    // Every slot taken and the queue full: each call holds a child's pipes, its input and its
    // output, and unbounded, a burst of calls exhausts the machine's descriptors and memory.
    // A call whose result is on its way (awaiting the harness's ack) no longer counts.
    if (this.#running.size - this.#reportingCalls >= this.#deps.maxRunning + this.#deps.maxQueued) {
      throw this.#refused(
        params,
        new ResourceExhaustedError("too many tool calls", {
          reason: "too_many_tool_calls",
          max_running: this.#deps.maxRunning,
          max_queued: this.#deps.maxQueued,
        }),
      );
    }
    const served = this.#deps.tools.servedTool(params.tool);
    if (!served) {
      throw this.#refused(
        params,
        new CapabilityMissingError(`tool ${echoed(params.tool)} is not served`, {
          reason: "capability_missing",
          capability: `tool:${echoed(params.tool)}`,
        }),
      );
    }
    let input: unknown = params.input;
    if (served.input) {
      try {
        input = checkedInput(served.input, params.input);
      } catch (error) {
        throw this.#refused(params, error);
      }
    }
    const session = this.#deps.sessions.get(params.session_id);
    if (!session || !this.#deps.sessions.isLive(session)) {
      throw this.#refused(
        params,
        new NotFoundError("unknown session", { reason: "unknown_session" }),
      );
    }
    // One property test each on the common path: no `_meta`, no telemetry.
    const meta = (params as { _meta?: unknown })._meta;
    let trace = meta === undefined ? undefined : traceContext(meta);
    const telemetry = this.#deps.telemetry;
    let span: TracedSpan | undefined;
    if (telemetry !== undefined) {
      span = telemetry.start(`tool.call ${params.tool}`, "server", {
        "bma.tool": params.tool,
        "bma.tool_call_id": id,
        "bma.session_id": params.session_id,
      }, trace);
      trace = span.trace ?? trace;
    }
    const call: RunningCall = {
      params,
      input,
      session,
      abort: new CallAbort(),
      startedAt: log ? this.#deps.clock.now() : 0,
      trace,
      span,
      reporting: false,
      done: false,
      waiters: undefined,
      holdsSlot: false,
      queuedAt: undefined,
      queuedTimer: undefined,
    };
    log?.debug("tool call started", {
      tool_call_id: id,
      tool: params.tool,
      session_id: params.session_id,
    });
    this.#running.set(id, call);
    this.#watch(session);
    let set = this.#perSession.get(session.id);
    if (!set) this.#perSession.set(session.id, set = new Set());
    set.add(call);
    // The handler starts after the ack: its progress and result must follow it on the wire.
    reply.afterReply(() => this.#admit(call, served, set));
    return { ok: true };
  }

  /** Starts an acknowledged call in a free slot, or queues it for the next. */
  #admit(call: RunningCall, served: ServedTool, set: Set<RunningCall>): void {
    if (this.#slotsHeld < this.#deps.maxRunning && this.#waitingHead === this.#waiting.length) {
      this.#slotsHeld++;
      call.holdsSlot = true;
      this.#execute(call, served, set);
      return;
    }
    const { clock } = this.#deps;
    call.queuedAt = clock.now();
    this.#waiting.push({ call, served, set });
    const timeoutMs = call.params.timeout_ms;
    if (timeoutMs !== undefined) {
      call.queuedTimer = clock.setTimeout(
        () => call.abort.abort(new ToolCallAbort("timed_out", "timeout_ms passed")),
        timeoutMs,
      );
    }
    this.#deps.callLog?.debug("tool call queued: every slot is taken", {
      tool_call_id: call.params.tool_call_id,
      tool: call.params.tool,
      max_running: this.#deps.maxRunning,
    });
    // Canceled, timed out or its session ending while it waits: reported at once, not run.
    call.abort.onAbort(() => {
      if (call.queuedAt === undefined) return;
      call.queuedAt = undefined;
      if (call.queuedTimer !== undefined) clock.clearTimeout(call.queuedTimer);
      call.queuedTimer = undefined;
      this.#execute(call, served, set);
    });
  }

  /** Frees a call's slot; a call waiting for one takes it. */
  #releaseSlot(call: RunningCall): void {
    if (!call.holdsSlot) return;
    call.holdsSlot = false;
    this.#slotsHeld--;
    // A handler that ends at once frees its slot inside #admitWaiting's loop, which goes on.
    if (this.#waitingHead !== this.#waiting.length && !this.#admitting) this.#admitWaiting();
  }

  /** Gives free slots to the calls waiting longest. */
  #admitWaiting(): void {
    this.#admitting = true;
    try {
      const waiting = this.#waiting;
      while (this.#slotsHeld < this.#deps.maxRunning && this.#waitingHead < waiting.length) {
        const next = waiting[this.#waitingHead];
        waiting[this.#waitingHead++] = undefined;
        if (next === undefined || next.call.queuedAt === undefined) continue;
        if (next.call.queuedTimer !== undefined) {
          this.#deps.clock.clearTimeout(next.call.queuedTimer);
          next.call.queuedTimer = undefined;
        }
        this.#slotsHeld++;
        next.call.holdsSlot = true;
        this.#execute(next.call, next.served, next.set);
      }
      if (this.#waitingHead === waiting.length) {
        this.#waiting = [];
        this.#waitingHead = 0;
      } else if (this.#waitingHead > 1024 && this.#waitingHead * 2 > waiting.length) {
        this.#waiting = waiting.slice(this.#waitingHead);
        this.#waitingHead = 0;
      }
    } finally {
      this.#admitting = false;
    }
  }

  /**
   * Runs a call to its end, then forgets it. A handler that answers synchronously is reported
   * without a single await: most tool calls of a busy executor are that quick, and every async
   * step is a promise and a microtask more per call.
   */
  #execute(call: RunningCall, served: ServedTool, set: Set<RunningCall>): void {
    const finish = () => this.#finish(call, set);
    const failed = (error: unknown) => {
      this.#deps.logger.error("tool call runner failed", { error: describeError(error) });
      if (call.reporting) finish();
      else this.#reportLast(call).then(finish, finish);
    };
    try {
      const reported = this.#run(call, served, call.session);
      if (reported) reported.then(finish, failed);
      else finish();
    } catch (error) {
      failed(error);
    }
  }

  /**
   * Reports a call whose runner failed before it reported (a bug of the SDK's): the harness's
   * call ends `failed` all the same, and is not left waiting until its session ends.
   */
  #reportLast(call: RunningCall): Promise<boolean> {
    call.reporting = true;
    this.#reportingCalls++;
    this.#releaseSlot(call);
    const { params } = call;
    return this.#deps.results.send({
      session_id: params.session_id,
      tool_call_id: params.tool_call_id,
      outcome: "failed",
      error: { message: "the executor failed to report the call", code: "handler_failed" },
    });
  }

  /** Logs a refused call (before any ack); returns the refusal to throw. */
  #refused(params: ToolCallParams, error: unknown): unknown {
    const log = this.#deps.callLog;
    if (!log) return error;
    const refusal = error as { code?: unknown; data?: { reason?: unknown; issues?: unknown } };
    const issues = Array.isArray(refusal.data?.issues)
      ? (refusal.data.issues as { path?: unknown }[]).map((issue) =>
        Array.isArray(issue.path) ? issue.path.join(".") : ""
      )
      : undefined;
    // Where the input is wrong (issue paths), never what it holds.
    log.info("tool call refused", {
      tool_call_id: params.tool_call_id,
      tool: params.tool,
      session_id: params.session_id,
      code: refusal.code,
      reason: refusal.data?.reason,
      ...(issues ? { issues } : {}),
    });
    return error;
  }

  /** Logs how a call ended (its outcome is about to be reported). */
  #ended(call: RunningCall, result: ToolResultParams, log: Logger): void {
    const { params } = call;
    log.info("tool call ended", {
      tool_call_id: params.tool_call_id,
      tool: params.tool,
      session_id: params.session_id,
      outcome: result.outcome,
      ...(result.is_error ? { is_error: true } : {}),
      ...(result.error?.code ? { error_code: result.error.code } : {}),
      duration_ms: this.#deps.clock.now() - call.startedAt,
    });
  }

  /** Forgets a call that has finished and reported. */
  #finish(call: RunningCall, set: Set<RunningCall>): void {
    const { session } = call;
    this.#running.delete(call.params.tool_call_id);
    if (call.reporting) this.#reportingCalls--;
    this.#releaseSlot(call);
    this.#remember(call.params.tool_call_id, call.params.session_id);
    // Ended with the report; a runner that failed before it reported ends it here.
    call.span?.end("the call ended without a report");
    set.delete(call);
    if (set.size === 0) this.#perSession.delete(session.id);
    call.done = true;
    for (const resolve of call.waiters ?? []) resolve();
    if (session.oneShot && set.size === 0) {
      void this.#deps.sessions.end(session, {
        reason: "one_shot_done",
        graceMs: this.#deps.sessionGraceMs,
        notify: true,
      });
    }
  }

  /** Serves `tool.cancel`. */
  cancel(params: ToolCancelParams): ToolCancelResult {
    const call = this.#running.get(params.tool_call_id);
    if (!call || call.reporting || call.abort.aborted) return { canceled: false };
    if (params.session_id && params.session_id !== call.params.session_id) {
      return { canceled: false };
    }
    call.abort.abort(new ToolCallAbort("canceled", params.reason ?? "canceled"));
    return { canceled: true };
  }

  /** Resolves once every call of the session has finished and reported. */
  async settled(sessionId: string): Promise<void> {
    const set = this.#perSession.get(sessionId);
    if (set) await Promise.all([...set].map(finished));
  }

  /** Resolves once every call has finished and reported. */
  async allSettled(): Promise<void> {
    await Promise.all([...this.#running.values()].map(finished));
  }

  /** Aborts every running handler (the client stops). */
  abortAll(reason: string): void {
    for (const call of this.#running.values()) {
      call.abort.abort(new ToolCallAbort("canceled", reason));
    }
  }

  /**
   * Aborts the session's calls when it begins to end, and holds its end (`session.ended`) until
   * they have reported: a cleanup hook, like the machine's for the session's processes.
   */
  #watch(session: ExecutorSession): void {
    if (this.#watched.has(session)) return;
    this.#watched.add(session);
    session.signal.addEventListener("abort", () => {
      for (const call of this.#perSession.get(session.id) ?? []) {
        if (call.session === session) {
          call.abort.abort(new ToolCallAbort("canceled", "the session is ending"));
        }
      }
    }, { once: true });
    session.onCleanup(() => this.settled(session.id));
  }

  #remember(id: string, sessionId: string): void {
    this.#finished.add(id);
    this.#finishedSessions.set(id, sessionId);
  }

  /** Whether the running or finished call `id` is one of session `sessionId`. */
  #sameSession(id: string, sessionId: string): boolean {
    const running = this.#running.get(id);
    if (running !== undefined) return running.params.session_id === sessionId;
    return this.#finishedSessions.get(id) === sessionId;
  }

  /** Runs the handler and reports its outcome; returns a promise only if that takes waiting. */
  #run(
    call: RunningCall,
    served: ServedTool,
    session: ExecutorSession,
  ): Promise<unknown> | undefined {
    const { params, abort } = call;
    const { clock } = this.#deps;
    if (session.signal.aborted) {
      abort.abort(new ToolCallAbort("canceled", "the session is ending"));
    }
    let timer: TimerHandle | undefined;
    if (params.timeout_ms !== undefined && !abort.aborted) {
      // The time a call waited for a slot is part of its timeout.
      const queuedAt = call.queuedAt;
      call.queuedAt = undefined;
      const left = queuedAt === undefined
        ? params.timeout_ms
        : params.timeout_ms - (clock.now() - queuedAt);
      if (left <= 0) abort.abort(new ToolCallAbort("timed_out", "timeout_ms passed"));
      else {
        timer = clock.setTimeout(
          () => abort.abort(new ToolCallAbort("timed_out", "timeout_ms passed")),
          left,
        );
      }
    } else call.queuedAt = undefined;
    const report = (result: ToolResultParams): Promise<unknown> => {
      if (timer !== undefined) clock.clearTimeout(timer);
      call.reporting = true;
      this.#reportingCalls++;
      this.#releaseSlot(call);
      const log = this.#deps.callLog;
      if (log) this.#ended(call, result, log);
      call.span?.endWithOutcome(result);
      return this.#deps.results.send(result);
    };
    const context = new CallContext(call, (update) => this.#progress(call, update));
    let outcome: ToolResultParams | Promise<ToolResultParams>;
    try {
      outcome = this.#outcome(call, served, context);
    } catch (error) {
      // Every accepted call ends with a result: a failure of the SDK's own ends it `failed`.
      outcome = this.#failed(call, error);
    }
    if (!(outcome instanceof Promise)) return report(outcome);
    return outcome.then(report, (error) => report(this.#failed(call, error)));
  }

  /**
   * Runs the handler and turns how it ended into the result to report: at once when the
   * handler answers synchronously, else a promise.
   */
  #outcome(
    call: RunningCall,
    served: ServedTool,
    context: ToolContext,
  ): ToolResultParams | Promise<ToolResultParams> {
    const { abort } = call;
    // A call aborted before its handler started (its session stopped first) never starts it.
    if (abort.aborted) return this.#aborted(call);
    let value: unknown;
    let thenable: boolean;
    try {
      value = served.handler(call.input, context);
    } catch (error) {
      return this.#thrown(call, served, error);
    }
    try {
      thenable = isThenable(value);
    } catch {
      // Reading `then` threw (a Proxy's trap, a getter): a value that cannot be read.
      return this.#failed(call, unreadable(call.params.tool));
    }
    if (thenable) return this.#awaitOutcome(call, served, Promise.resolve(value));
    return this.#completed(call, served, value);
  }

  /** The outcome of what a handler threw: `timed_out`, a tool-level error, or `failed`. */
  #thrown(
    call: RunningCall,
    served: ServedTool,
    error: unknown,
  ): ToolResultParams | Promise<ToolResultParams> {
    return thrownKind(error) === "timeout"
      ? this.#timedOut(call, served, error as ToolTimeoutError)
      : this.#failed(call, error);
  }

  /** The outcome of a handler that returned a promise: its value, or the abort, first. */
  async #awaitOutcome(
    call: RunningCall,
    served: ServedTool,
    ran: Promise<unknown>,
  ): Promise<ToolResultParams> {
    const { abort } = call;
    // An abort ends the call at once, whether or not the handler notices its signal.
    const aborted = new Promise<"aborted">((resolve) => {
      abort.onAbort(() => resolve("aborted"));
    });
    let first: { v: unknown } | "aborted";
    try {
      first = await Promise.race([ran.then((v) => ({ v })), aborted]);
    } catch (error) {
      return this.#thrown(call, served, error);
    }
    if (first === "aborted") {
      ran.catch(() => {}); // the handler's late end is of no interest any more
      return this.#aborted(call);
    }
    return this.#completed(call, served, first.v);
  }

  /** The outcome of a handler's value: rendered, or a failure if it does not render. */
  #completed(
    call: RunningCall,
    served: ServedTool,
    value: unknown,
  ): ToolResultParams | Promise<ToolResultParams> {
    const { params, abort } = call;
    if (abort.aborted) return this.#aborted(call);
    let rendered: RenderedResult | Promise<RenderedResult>;
    try {
      if (served.output) value = checkedOutput(params.tool, served.output, value);
      rendered = renderToolOutput(params.tool, value, {
        toolCallId: params.tool_call_id,
        inlineBytes: this.#deps.inlineBytes,
        upload: this.#upload,
        onUploadFailed: (error) =>
          this.#deps.logger.warn("artifact upload failed: sending the preview only", {
            tool_call_id: params.tool_call_id,
            error: describeError(error),
          }),
      });
    } catch (error) {
      // Checking or rendering threw something else than its verdict: a getter or Proxy trap of
      // the value threw, or it cannot be serialized (a BigInt, a cycle, too deep a nesting).
      if (thrownKind(error) === "invalid") return this.#failed(call, error);
      this.#deps.logger.warn("tool result cannot be read or serialized", {
        tool: params.tool,
        tool_call_id: params.tool_call_id,
        error: describeError(error),
      });
      return this.#failed(call, unreadable(params.tool));
    }
    if (isThenable(rendered)) {
      return rendered.then(
        (done) => abort.aborted ? this.#aborted(call) : this.#resultOf(call, done),
        (error) => this.#failed(call, error),
      );
    }
    return this.#resultOf(call, rendered);
  }

  #resultOf(call: RunningCall, rendered: RenderedResult): ToolResultParams {
    const { params } = call;
    // Built member by member: spreading `rendered` copies through V8's slow path.
    const result: ToolResultParams = {
      session_id: params.session_id,
      tool_call_id: params.tool_call_id,
      outcome: "completed",
      content: rendered.content,
    };
    if (rendered.is_error !== undefined) result.is_error = rendered.is_error;
    if (rendered.artifacts !== undefined) result.artifacts = rendered.artifacts;
    if (rendered.structured_content !== undefined) {
      result.structured_content = rendered.structured_content;
    }
    return result;
  }

  /**
   * A handler's own time limit passed ({@linkcode ToolTimeoutError}): outcome `timed_out`, with
   * what the tool produced until then rendered as its content.
   */
  #timedOut(
    call: RunningCall,
    served: ServedTool,
    error: ToolTimeoutError,
  ): ToolResultParams | Promise<ToolResultParams> {
    const { params } = call;
    const info = { message: this.#deps.scrubber.scrub(thrownText(error)), code: "timeout" };
    const timedOut = (result: ToolResultParams): ToolResultParams => {
      if (result.outcome !== "completed") return result;
      const { is_error: _toolLevel, ...rest } = result;
      return { ...rest, outcome: "timed_out", error: info };
    };
    let produced: unknown;
    try {
      produced = error.result;
    } catch {
      produced = undefined; // a getter that throws: nothing to show
    }
    if (produced === undefined) {
      return timedOut({
        session_id: params.session_id,
        tool_call_id: params.tool_call_id,
        outcome: "completed",
      });
    }
    const rendered = this.#completed(call, served, produced);
    return isThenable(rendered) ? rendered.then(timedOut) : timedOut(rendered);
  }

  #aborted(call: RunningCall): ToolResultParams {
    const { params, abort } = call;
    const reason = abort.reason;
    const outcome: ToolOutcome = reason instanceof ToolCallAbort ? reason.outcome : "canceled";
    return {
      session_id: params.session_id,
      tool_call_id: params.tool_call_id,
      outcome,
      error: outcome === "timed_out"
        ? { message: `timed out after ${params.timeout_ms} ms`, code: "timeout" }
        : { message: "canceled", code: "canceled" },
    };
  }

  /**
   * The outcome of a handler's failure: a {@linkcode ToolError} is a tool-level error, anything
   * else `failed`. Never throws: whatever the handler threw is read defensively.
   */
  #failed(call: RunningCall, error: unknown): ToolResultParams {
    const { params } = call;
    if (call.abort.aborted) return this.#aborted(call);
    const base = { session_id: params.session_id, tool_call_id: params.tool_call_id };
    let kind = thrownKind(error);
    if (kind === "tool") {
      const content = this.#toolErrorContent(params.tool, error as ToolError);
      if (!(content instanceof InvalidToolOutputError)) {
        return { ...base, outcome: "completed", is_error: true, content };
      }
      error = content;
      kind = "invalid";
    }
    this.#deps.logger.warn("tool handler failed", {
      tool: params.tool,
      tool_call_id: params.tool_call_id,
      error: describeError(error),
    });
    return {
      ...base,
      outcome: "failed",
      error: {
        message: this.#deps.scrubber.scrub(thrownText(error)),
        code: kind === "invalid" ? "invalid_result" : "handler_failed",
      },
    };
  }

  /**
   * A {@linkcode ToolError}'s content: its blocks when they match the contract, else its message
   * as text; or, for content that does not match or cannot be read, why there is none.
   */
  #toolErrorContent(tool: string, error: ToolError): ContentBlock[] | InvalidToolOutputError {
    try {
      const content: unknown = error.content;
      if (content === undefined || content === null) {
        return [{ type: "text", text: this.#deps.scrubber.scrub(thrownText(error)) }];
      }
      if (Array.isArray(content)) return checkBlocks(content);
    } catch {
      // A block the contract refuses, or a getter or Proxy trap that threw.
    }
    return new InvalidToolOutputError(
      `the ${tool} handler threw a ToolError whose content does not match the contract`,
    );
  }

  #progress(call: RunningCall, update: string | ToolProgressUpdate): void {
    if (call.reporting || call.abort.aborted) return;
    const fields = typeof update === "string" ? { message: update } : update;
    try {
      this.#deps.progress.notify("tool.progress", {
        session_id: call.params.session_id,
        tool_call_id: call.params.tool_call_id,
        ...fields,
      });
    } catch (error) {
      // Progress is lossy: a closed connection drops it. Anything else is the caller's bug.
      if (error instanceof NotConnectedError || error instanceof ConnectionClosedError) return;
      throw error;
    }
  }
}
