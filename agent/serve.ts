/**
 * The agent capability on the executor end: `serveAgent(client, handler, options)` serves
 * `turn.start`, `turn.input`, `turn.cancel`, `session.close`, `interaction.response` and (with
 * `customTools`) `agent.custom_tool_result`, and runs the handler's turns.
 *
 * - An agent session opens with its first `turn.start` (no `session.assign`) and is held like
 *   an assigned one: it is listed in `resume.active_sessions`, so it survives reconnects.
 * - Durable events go through the client's event outbox: each gets its `event_id` and the
 *   session's next `sequence` when emitted, is kept until acknowledged, and is resent in order
 *   after a reconnect before anything newer (the harness rejects a gap, so nothing overtakes).
 * - Deltas are notifications: lossy, never resent.
 * - Requests the executor makes (`interaction.request`, `interaction.cancel`) are idempotent
 *   by their ids and resent until the harness answers.
 *
 * Portable: web-standard APIs only.
 */
import type { ExecutorClient } from "../executor/client.ts";
import { ClientStoppedError, ExecutorConfigError, NotConnectedError } from "../executor/errors.ts";
import type { ExecutorExtensionHost } from "../executor/extension.ts";
import type { ExecutorSession, SessionCleanup } from "../executor/sessions.ts";
import { backoffDelay, type Deferred, deferred, describeError, sleep } from "../executor/timing.ts";
import type { TimerHandle } from "../protocol/clock.ts";
import {
  ConnectionClosedError,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  ProtocolError,
  RequestTimeoutError,
} from "../protocol/errors.ts";
import {
  type Ack,
  type AgentCustomToolResultParams,
  type AgentEvent,
  AgentEventSchema,
  type Capabilities,
  type ContentBlock,
  type CustomToolResultResult,
  type EventDelta,
  type ExecutorRequestMethod,
  type InteractionRequestParams,
  type InteractionResponseParams,
  type InteractionResponseResult,
  isAgentEvent,
  type RequestMap,
  type SessionCloseParams,
  type SessionCloseResult,
  type SessionEventParams,
  type TurnCancelParams,
  type TurnCancelResult,
  type TurnInputParams,
  type TurnMetadata,
  type TurnStartParams,
  type TurnStartResult,
} from "../protocol/generated/contract.ts";
import {
  ConflictError,
  ErrorCode,
  NotFoundError,
  ResourceExhaustedError,
  RETRYABLE_ERROR_CODES,
  UnavailableError,
} from "../protocol/generated/errors.ts";
import { utf8Length } from "../protocol/jsonrpc.ts";
import type { Disposable, ReplyHooks } from "../protocol/peer.ts";
import {
  AgentTurnError,
  CustomToolsDisabledError,
  DuplicateEventIdError,
  InteractionMismatchError,
  TokenUnavailableError,
  TurnCanceledError,
  TurnEndedError,
} from "./errors.ts";
import { randomId } from "../protocol/ids.ts";
import { BoundedSet, RecentIds } from "../protocol/bounded-set.ts";
import { AsyncQueue } from "./queue.ts";
import type {
  AgentHandler,
  CustomToolOptions,
  CustomToolOutcome,
  EmitOptions,
  EmittedEvent,
  InteractionAnswer,
  InteractionRequest,
  LocalAnswer,
  ModelCredential,
  ToolsCredential,
  Turn,
  TurnEnd,
  TurnInput,
} from "./turn.ts";

/** Refresh a model or tools token when less than this remains: 10 minutes. */
export const TOKEN_REFRESH_LEAD_MS = 10 * 60_000;
/** How long a custom tool call waits for its result by default: 10 minutes. */
export const DEFAULT_CUSTOM_TOOL_TIMEOUT_MS = 10 * 60_000;
/** A token from `turn.start` without an expiry counts as valid this long (the platform's 1 hour). */
const ASSUMED_TOKEN_LIFETIME_MS = 60 * 60_000;
/** Room for the envelope around a `session.event`'s params when checking the frame size. */
const ENVELOPE_BYTES = 256;

/** Options of {@linkcode serveAgent}. */
export interface ServeAgentOptions {
  /**
   * Most agent sessions open at once, advertised as `agent.max_sessions`; a `turn.start` for a
   * new session beyond it is refused with -32009.
   */
  maxSessions?: number;
  /**
   * Serve `agent.custom_tool_result` and let turns call custom tools (`turn.customTool`);
   * advertised as `agent.custom_tools`. Default false.
   */
  customTools?: boolean;
  /** How long a custom tool call waits for its result. Default 10 minutes. */
  customToolTimeoutMs?: number;
  /** Refresh tokens when less than this remains. Default 10 minutes. */
  tokenRefreshLeadMs?: number;
  /**
   * After a cancel, how long `runTurn` may take to return before the turn is ended without it
   * (its later emits are refused). Default 5 s.
   */
  cancelGraceMs?: number;
}

/** A served agent capability. */
export interface AgentServer {
  /** The agent sessions held now. */
  readonly sessions: readonly string[];
  /** The running turn of a session, if any. */
  runningTurn(sessionId: string): string | undefined;
  /**
   * Stops serving: the agent methods are withdrawn (capabilities published), running turns are
   * canceled and every agent session ends (`session.ended`). Resolves once they have.
   */
  dispose(): Promise<void>;
}

/**
 * Serves the agent capability on `client` with `handler` (see {@linkcode AgentHandler}).
 * Advertises `agent` (with `max_sessions` and `custom_tools` as configured); call it before or
 * after `start()` (a change is published with `executor.capabilities.update`).
 */
export function serveAgent(
  client: ExecutorClient,
  handler: AgentHandler,
  options: ServeAgentOptions = {},
): AgentServer {
  if (!handler || typeof handler.runTurn !== "function") {
    throw new ExecutorConfigError("serveAgent needs a handler with runTurn");
  }
  const max = options.maxSessions;
  if (max !== undefined && (!Number.isInteger(max) || max < 1)) {
    throw new ExecutorConfigError("maxSessions must be a positive integer");
  }
  if (served.has(client)) {
    throw new ExecutorConfigError("this client already serves an agent: dispose it first");
  }
  const service = client.extend((host) => new AgentService(client, host, handler, options));
  served.add(client);
  return {
    get sessions() {
      return service.sessionIds();
    },
    runningTurn: (sessionId) => service.runningTurn(sessionId),
    dispose: () => service.dispose(),
  };
}

/** Clients serving an agent: one agent per client (the methods have one handler each). */
const served = new WeakSet<object>();

// ---- internal state --------------------------------------------------------------------------

type RunState = "opening" | "running" | "ending" | "ended";

interface TokenCache {
  token: string | undefined;
  expiresAt: number;
  url: string | undefined;
  /** The harness answered -32601: keep the current token, do not ask again. */
  methodMissing: boolean;
  inflight: Promise<TokenView> | undefined;
}

interface TokenView {
  token: string;
  expiresAt: number;
  url?: string;
}

interface PendingInteraction {
  readonly id: string;
  readonly run: TurnRun;
  readonly kind: InteractionRequest["kind"];
  readonly toolUseId: string | undefined;
  readonly done: Deferred<InteractionAnswer>;
  /** Stops resending the request once settled. */
  readonly stop: AbortController;
  /** Settles once the request has been answered (or given up on). */
  requested: Promise<void>;
  /** The platform's answer arrived and is being applied: the first answer won. */
  answered: boolean;
  platformId: string | undefined;
  timer: TimerHandle | undefined;
}

interface CustomWait {
  readonly run: TurnRun;
  readonly done: Deferred<CustomToolOutcome>;
  timer: TimerHandle | undefined;
}

interface SessionState {
  readonly id: string;
  readonly exec: ExecutorSession;
  sequence: number;
  ref: string | undefined;
  opened: boolean;
  /** Turn ids started in this conversation (a repeat is a duplicate). */
  readonly turnIds: BoundedSet<string>;
  readonly inputIds: BoundedSet<string>;
  run: TurnRun | undefined;
  closing: Promise<void> | undefined;
  readonly eventIds: RecentIds<string>;
  /** Emitted events not yet acknowledged (awaited before `session.close` releases). */
  readonly pending: Set<Promise<unknown>>;
  readonly interactions: Map<string, PendingInteraction>;
  readonly customWaits: Map<string, CustomWait>;
}

class TurnRun {
  readonly params: TurnStartParams;
  readonly controller: AbortController = new AbortController();
  readonly inputs: AsyncQueue<TurnInput> = new AsyncQueue<TurnInput>();
  readonly accepted: Deferred<TurnStartResult> = deferred<TurnStartResult>();
  readonly done: Deferred<void> = deferred<void>();
  readonly deltaIndex: Map<string, number> = new Map<string, number>();
  readonly model: TokenCache;
  readonly tools: TokenCache;
  epoch: number;
  state: RunState = "opening";
  turn!: AgentTurn;

  constructor(params: TurnStartParams, now: number) {
    this.params = params;
    this.accepted.promise.catch(() => {});
    const m = params.metadata ?? {};
    this.epoch = m.epoch ?? 0;
    this.model = tokenCache(m.model_token, m.model_token_expires_at, m.model_base_url, now);
    this.tools = tokenCache(m.tools_mcp_token, m.tools_mcp_token_expires_at, m.tools_mcp_url, now);
  }

  get turnId(): string {
    return this.params.turn_id;
  }

  get finished(): boolean {
    return this.state === "ending" || this.state === "ended";
  }

  /** A repeated `turn.start` of a newer epoch brings fresh credentials. */
  refresh(metadata: TurnMetadata | undefined, now: number): void {
    if (!metadata || (metadata.epoch ?? 0) < this.epoch) return;
    this.epoch = metadata.epoch ?? this.epoch;
    if (metadata.model_token) {
      Object.assign(
        this.model,
        tokenCache(
          metadata.model_token,
          metadata.model_token_expires_at,
          metadata.model_base_url ?? this.model.url,
          now,
        ),
      );
    }
    if (metadata.tools_mcp_token) {
      Object.assign(
        this.tools,
        tokenCache(
          metadata.tools_mcp_token,
          metadata.tools_mcp_token_expires_at,
          metadata.tools_mcp_url ?? this.tools.url,
          now,
        ),
      );
    }
  }
}

function tokenCache(
  token: string | undefined,
  expiresAt: string | undefined,
  url: string | undefined,
  now: number,
): TokenCache {
  const parsed = expiresAt === undefined ? NaN : Date.parse(expiresAt);
  return {
    token,
    expiresAt: Number.isFinite(parsed) ? parsed : now + ASSUMED_TOKEN_LIFETIME_MS,
    url,
    methodMissing: false,
    inflight: undefined,
  };
}

/** Errors after which the same request may be sent again. */
function isTransient(error: unknown): boolean {
  return error instanceof ConnectionClosedError || error instanceof NotConnectedError ||
    error instanceof RequestTimeoutError ||
    (error instanceof ProtocolError && RETRYABLE_ERROR_CODES.has(error.code));
}

/** Runs `fn` after the current request's answer has been written (a macrotask later). */
const RESERVED_TYPES: ReadonlySet<string> = new Set([
  "session.status_running",
  "session.status_idle",
]);

function rejected<T>(error: unknown): Promise<T> {
  const promise = Promise.reject(error);
  promise.catch(() => {});
  return promise;
}

// ---- the service ------------------------------------------------------------------------------

class AgentService {
  readonly #client: ExecutorClient;
  readonly #internals: ExecutorExtensionHost;
  readonly #handler: AgentHandler;
  readonly #options: ServeAgentOptions;
  readonly #sessions = new Map<string, SessionState>();
  readonly #disposables: Disposable[] = [];
  readonly #leadMs: number;
  #disposed = false;

  constructor(
    client: ExecutorClient,
    internals: ExecutorExtensionHost,
    handler: AgentHandler,
    options: ServeAgentOptions,
  ) {
    this.#client = client;
    this.#internals = internals;
    this.#handler = handler;
    this.#options = options;
    this.#leadMs = options.tokenRefreshLeadMs ?? TOKEN_REFRESH_LEAD_MS;
    const agent: Record<string, unknown> = {};
    if (options.maxSessions !== undefined) agent.max_sessions = options.maxSessions;
    if (options.customTools) agent.custom_tools = true;
    // Contributed first, so the methods registered below publish the complete object.
    this.#disposables.push(
      internals.contributeCapabilities(() => ({ agent } as Capabilities)),
      client.onRequest("turn.start", (params, context) => this.#turnStart(params, context)),
      client.onRequest("turn.input", (params) => this.#turnInput(params)),
      client.onRequest("turn.cancel", (params) => this.#turnCancel(params)),
      client.onRequest("session.close", (params) => this.#sessionClose(params)),
      client.onRequest("interaction.response", (params) => this.#interactionResponse(params)),
    );
    if (options.customTools) {
      this.#disposables.push(
        client.onRequest("agent.custom_tool_result", (params) => this.#customToolResult(params)),
      );
    }
  }

  sessionIds(): string[] {
    return [...this.#sessions.keys()];
  }

  runningTurn(sessionId: string): string | undefined {
    const run = this.#sessions.get(sessionId)?.run;
    return run && !run.finished ? run.turnId : undefined;
  }

  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const disposable of this.#disposables.splice(0)) disposable.dispose();
    served.delete(this.#client);
    await Promise.all(
      [...this.#sessions.values()].map((state) =>
        this.#internals.endSession(state.exec, "agent_disposed", true)
      ),
    );
  }

  get #logger() {
    return this.#internals.logger;
  }

  get #clock() {
    return this.#internals.clock;
  }

  // ---- turn.start ----------------------------------------------------------------------------

  async #turnStart(params: TurnStartParams, reply: ReplyHooks): Promise<TurnStartResult> {
    let state = this.#sessions.get(params.session_id);
    if (state?.closing) {
      // session.close (or the session's end) is still under way; the next conversation waits.
      throw new UnavailableError("the session is closing", { reason: "session_closing" });
    }
    if (state) {
      const run = state.run;
      if (run?.turnId === params.turn_id) {
        const result = await run.accepted.promise;
        run.refresh(params.metadata, this.#clock.now());
        return { ...result, duplicate: true };
      }
      if (state.turnIds.has(params.turn_id)) return this.#startResult(state, params, true);
      if (run && !run.finished) {
        throw new ConflictError("a turn is running: use turn.input", {
          reason: "turn_running",
          turn_id: run.turnId,
        });
      }
    } else {
      if (this.#client.draining) throw new UnavailableError("draining", { reason: "draining" });
      const max = this.#options.maxSessions;
      if (max !== undefined && this.#sessions.size >= max) {
        throw new ResourceExhaustedError(`at most ${max} agent sessions`, {
          reason: "max_sessions",
        });
      }
      const held = this.#client.session(params.session_id);
      if (held?.state === "stopping") {
        // The previous conversation's session is still ending (its session.ended is on the way).
        throw new UnavailableError("the session is closing", { reason: "session_closing" });
      }
      if (held) {
        throw new ConflictError("the session is held as an assigned session", {
          reason: "session_exists",
        });
      }
      state = this.#openState(params.session_id);
    }
    const run = new TurnRun(params, this.#clock.now());
    run.turn = new AgentTurn(this, state, run, !state.opened);
    if (run.model.token) this.#internals.addSecret(run.model.token);
    if (run.tools.token) this.#internals.addSecret(run.tools.token);
    run.controller.signal.addEventListener("abort", () => {
      this.#endWaits(state, run, run.controller.signal.reason, "turn_canceled");
      // A canceled turn takes no more input: a loop reading the inputs ends too.
      run.inputs.end();
    }, { once: true });
    state.run = run;
    if (!state.opened) {
      try {
        const opened = await this.#handler.openTurn?.(run.turn);
        state.opened = true;
        state.ref = (opened && opened.executorSessionRef) ?? params.executor_session_ref;
      } catch (error) {
        if (state.run === run) state.run = undefined;
        run.state = "ended";
        run.accepted.reject(error);
        run.done.resolve();
        // A conversation that never opened is not held.
        if (!state.opened && !state.closing) {
          state.closing = Promise.resolve();
          this.#forget(state);
          void this.#internals.endSession(state.exec, "open_failed", false);
        }
        throw error;
      }
    }
    state.turnIds.add(params.turn_id);
    const result = this.#startResult(state, params, false);
    run.accepted.resolve(result);
    // The turn runs once its acceptance is on the wire: its events follow the answer.
    reply.afterReply(() => void this.#run(state, run));
    return result;
  }

  #startResult(state: SessionState, params: TurnStartParams, duplicate: boolean): TurnStartResult {
    return {
      turn_id: params.turn_id,
      accepted: true,
      ...(state.ref !== undefined ? { executor_session_ref: state.ref } : {}),
      ...(duplicate ? { duplicate: true } : {}),
    };
  }

  #openState(sessionId: string): SessionState {
    const exec = this.#internals.openSession(sessionId);
    const state: SessionState = {
      id: sessionId,
      exec,
      sequence: 0,
      ref: undefined,
      opened: false,
      turnIds: new BoundedSet<string>(4096),
      inputIds: new BoundedSet<string>(4096),
      run: undefined,
      closing: undefined,
      eventIds: new RecentIds<string>(50_000),
      pending: new Set(),
      interactions: new Map(),
      customWaits: new Map(),
    };
    this.#sessions.set(sessionId, state);
    exec.onCleanup((cleanup) => this.#cleanup(state, cleanup));
    return state;
  }

  async #run(state: SessionState, run: TurnRun): Promise<void> {
    const signal = run.controller.signal;
    run.state = "running";
    this.#emit(state, run, { type: "session.status_running" }, {}, true);
    let end: void | TurnEnd = undefined;
    let failure: unknown;
    let failed = false;
    if (!signal.aborted) {
      try {
        end = await this.#untilGraceAfterCancel(
          run,
          Promise.resolve().then(() => this.#handler.runTurn(run.turn)),
        );
      } catch (error) {
        failed = true;
        failure = error;
      }
    }
    run.state = "ending";
    let idle: AgentEvent;
    if (signal.aborted) {
      const reason = signal.reason instanceof TurnCanceledError ? signal.reason.reason : "canceled";
      idle = { type: "session.status_idle", turn_outcome: "canceled", stop_reason: reason };
    } else if (failed) {
      this.#logger.warn("runTurn failed", {
        session_id: state.id,
        turn_id: run.turnId,
        error: describeError(failure),
      });
      const error = failure instanceof AgentTurnError
        ? { message: this.#internals.scrub(failure.message), code: failure.code }
        : { message: "the agent loop failed", code: "agent_failed" };
      this.#emit(state, run, { type: "session.error", error }, {}, true);
      idle = { type: "session.status_idle", turn_outcome: "failed", stop_reason: "error" };
    } else {
      idle = {
        type: "session.status_idle",
        turn_outcome: (end && end.outcome) ?? "completed",
        stop_reason: (end && end.stop_reason) ?? "end_turn",
      };
    }
    this.#endWaits(state, run, new TurnEndedError(run.turnId), "turn_ended");
    run.inputs.end();
    // The session takes the next turn.start from here: the idle event is the turn's last.
    if (state.run === run) state.run = undefined;
    this.#emit(state, run, idle, {}, true);
    run.state = "ended";
    run.done.resolve();
  }

  /** `work`, or (once the turn is canceled) the end of the cancel grace period if sooner. */
  #untilGraceAfterCancel<T>(run: TurnRun, work: Promise<T>): Promise<T | void> {
    const signal = run.controller.signal;
    const stopGrace = new AbortController();
    return new Promise<T | void>((resolve, reject) => {
      work.then(resolve, reject).finally(() => stopGrace.abort());
      const onAbort = () => {
        sleep(this.#clock, this.#options.cancelGraceMs ?? 5_000, stopGrace.signal).then(() => {
          this.#logger.warn("runTurn did not return after the cancel: the turn ends without it", {
            session_id: run.params.session_id,
            turn_id: run.turnId,
          });
          resolve();
        }, () => {});
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Ends what a turn still waits for; open interactions are withdrawn with `why`. */
  #endWaits(state: SessionState, run: TurnRun, reason: unknown, why: string): void {
    for (const pending of [...state.interactions.values()]) {
      if (pending.run !== run) continue;
      this.#settleInteraction(state, pending, undefined, reason);
      this.#withdraw(state, pending.id, why);
    }
    for (const [id, wait] of [...state.customWaits]) {
      if (wait.run !== run) continue;
      state.customWaits.delete(id);
      if (wait.timer !== undefined) this.#clock.clearTimeout(wait.timer);
      wait.done.reject(reason);
    }
  }

  #cancel(state: SessionState, run: TurnRun, reason: string): void {
    if (run.controller.signal.aborted) return;
    run.controller.abort(new TurnCanceledError(state.id, run.turnId, reason));
  }

  // ---- turn.input / turn.cancel ---------------------------------------------------------------

  #turnInput(params: TurnInputParams): Ack {
    const state = this.#sessions.get(params.session_id);
    // A repeat is acknowledged even if the turn ended meanwhile: the input was delivered.
    if (state?.inputIds.has(params.input_id)) return { ok: true, duplicate: true };
    const run = state?.run;
    if (!state || state.closing || !run || run.finished || run.turnId !== params.turn_id) {
      throw new ConflictError("the turn is not running: start a new turn", {
        reason: "turn_not_running",
        ...(run && !run.finished ? { turn_id: run.turnId } : {}),
      });
    }
    state.inputIds.add(params.input_id);
    run.inputs.push({ input_id: params.input_id, input: params.input });
    return { ok: true };
  }

  #turnCancel(params: TurnCancelParams): TurnCancelResult {
    const state = this.#sessions.get(params.session_id);
    const run = state?.run;
    if (!state || !run || run.finished) return { canceled: false };
    if (params.turn_id !== undefined && params.turn_id !== run.turnId) return { canceled: false };
    this.#cancel(state, run, params.reason ?? "canceled");
    return { canceled: true };
  }

  // ---- session.close and the session's end ----------------------------------------------------

  #sessionClose(params: SessionCloseParams): SessionCloseResult {
    const state = this.#sessions.get(params.session_id);
    if (!state) return { closed: false };
    state.closing ??= this.#close(state, params.reason ?? "closed");
    return { closed: true };
  }

  /** Cancel, wait for the events to be acknowledged, release, then `session.ended`. */
  async #close(state: SessionState, reason: string): Promise<void> {
    // Let the close's answer go out first.
    await Promise.resolve();
    const run = state.run;
    if (run) {
      this.#cancel(state, run, "session_closed");
      await run.done.promise;
    }
    await Promise.allSettled([...state.pending]);
    await this.#release(state, reason);
    await this.#internals.endSession(state.exec, reason, true);
    // Forgotten last: until session.ended is out, a turn.start for the id is told to wait.
    this.#forget(state);
  }

  /** The session ends otherwise (session.stop, not resumed, the client stops). */
  async #cleanup(state: SessionState, cleanup: SessionCleanup): Promise<void> {
    if (state.closing) return;
    state.closing = (async () => {
      const run = state.run;
      if (run) {
        this.#cancel(state, run, cleanup.reason);
        await new Promise<void>((resolve) => {
          run.done.promise.then(resolve);
          if (cleanup.graceSignal.aborted) resolve();
          cleanup.graceSignal.addEventListener("abort", () => resolve(), { once: true });
        });
      }
      await this.#release(state, cleanup.reason);
      this.#forget(state);
    })();
    await state.closing;
  }

  /** Releases the local conversation (the handler's closeSession). */
  async #release(state: SessionState, reason: string): Promise<void> {
    try {
      await this.#handler.closeSession?.(state.id, { reason });
    } catch (error) {
      this.#logger.warn("closeSession failed", {
        session_id: state.id,
        error: describeError(error),
      });
    }
  }

  #forget(state: SessionState): void {
    if (this.#sessions.get(state.id) === state) this.#sessions.delete(state.id);
  }

  // ---- events ---------------------------------------------------------------------------------

  emit(
    state: SessionState,
    run: TurnRun,
    event: AgentEvent,
    options: EmitOptions,
  ): Promise<EmittedEvent> {
    if (run.finished) return rejected(new TurnEndedError(run.turnId));
    const type = (event as { type?: unknown } | undefined)?.type;
    if (typeof type === "string" && RESERVED_TYPES.has(type)) {
      return rejected(
        new InvalidOutgoingParamsError("session.event", [{
          path: ["event", "type"],
          message: `${type} is emitted by the turn itself`,
          code: "custom",
        }]),
      );
    }
    const checked = isAgentEvent(event) ? undefined : AgentEventSchema.safeParse(event);
    if (checked && !checked.success) {
      return rejected(
        new InvalidOutgoingParamsError(
          "session.event",
          checked.error.issues.map((i) => ({
            path: ["event", ...i.path.map(String)],
            message: i.message,
            code: i.code,
          })),
        ),
      );
    }
    return this.#emit(state, run, event, options, false);
  }

  #emit(
    state: SessionState,
    run: TurnRun,
    event: AgentEvent,
    options: EmitOptions,
    internal: boolean,
  ): Promise<EmittedEvent> {
    const eventId = options.eventId ?? randomId("evt_");
    if (state.eventIds.has(eventId)) return rejected(new DuplicateEventIdError(eventId));
    const sequence = state.sequence + 1;
    const params: SessionEventParams = {
      session_id: state.id,
      event: event as unknown as SessionEventParams["event"],
      turn_id: run.turnId,
      event_id: eventId,
      sequence,
    };
    const bytes = utf8Length(JSON.stringify(params)) + ENVELOPE_BYTES;
    if (bytes > this.#internals.maxFrameBytes) {
      // Sent, it would be refused for good and leave a gap no later event could pass.
      return rejected(new FrameTooLargeError(bytes, this.#internals.maxFrameBytes));
    }
    state.sequence = sequence;
    state.eventIds.add(eventId);
    run.deltaIndex.delete(eventId);
    const sent = this.#client.call("session.event", params).then((ack): EmittedEvent => ({
      event_id: eventId,
      sequence,
      ...(ack.acked_sequence !== undefined ? { acked_sequence: ack.acked_sequence } : {}),
      ...(ack.duplicate ? { duplicate: true } : {}),
    }));
    state.pending.add(sent);
    sent.then(
      () => state.pending.delete(sent),
      (error) => {
        state.pending.delete(sent);
        if (error instanceof NotFoundError && state.run === run) {
          // The harness no longer knows the session: the turn cannot go on.
          this.#cancel(state, run, "session_lost");
        }
        if (!(error instanceof ClientStoppedError)) {
          this.#logger.warn("agent event not delivered", {
            session_id: state.id,
            sequence,
            internal,
            error: describeError(error),
          });
        }
      },
    );
    return sent;
  }

  delta(state: SessionState, run: TurnRun, eventId: string, delta: EventDelta): void {
    if (run.finished || state.eventIds.has(eventId)) return;
    const index = run.deltaIndex.get(eventId) ?? 0;
    run.deltaIndex.set(eventId, index + 1);
    try {
      this.#client.notify("session.event_delta", {
        session_id: state.id,
        turn_id: run.turnId,
        event_id: eventId,
        delta,
        index,
      });
    } catch (error) {
      // Deltas are lossy: a missing connection drops them. A malformed one is the caller's bug.
      if (error instanceof InvalidOutgoingParamsError || error instanceof FrameTooLargeError) {
        throw error;
      }
    }
  }

  // ---- interactions ---------------------------------------------------------------------------

  requestInteraction(
    state: SessionState,
    run: TurnRun,
    request: InteractionRequest,
    signal: AbortSignal | undefined,
  ): Promise<InteractionAnswer> {
    if (run.finished) return rejected(new TurnEndedError(run.turnId));
    if (run.controller.signal.aborted) return rejected(run.controller.signal.reason);
    if (signal?.aborted) return rejected(signal.reason);
    const id = request.interaction_id ?? randomId("ix_");
    const existing = state.interactions.get(id);
    if (existing) {
      // A repeat of the open request joins it; the same id for something else is refused.
      const same = existing.kind === request.kind && existing.toolUseId === request.tool_use_id;
      return same ? existing.done.promise : rejected(new InteractionMismatchError(id));
    }
    const expiresAt = request.expires_at instanceof Date
      ? request.expires_at.toISOString()
      : request.expires_at;
    const params: InteractionRequestParams = {
      session_id: state.id,
      turn_id: run.turnId,
      interaction_id: id,
      kind: request.kind,
      ...(request.tool_use_id !== undefined ? { tool_use_id: request.tool_use_id } : {}),
      ...(request.title !== undefined ? { title: request.title } : {}),
      ...(request.prompt !== undefined ? { prompt: request.prompt } : {}),
      ...(request.options !== undefined ? { options: request.options } : {}),
      ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
    };
    const pending: PendingInteraction = {
      id,
      run,
      kind: request.kind,
      toolUseId: request.tool_use_id,
      done: deferred<InteractionAnswer>(),
      stop: new AbortController(),
      requested: Promise.resolve(),
      answered: false,
      platformId: undefined,
      timer: undefined,
    };
    pending.done.promise.catch(() => {});
    state.interactions.set(id, pending);
    if (expiresAt !== undefined) {
      // Local authority: past expires_at the answer is no, whatever the platform says later.
      const delay = Math.max(0, Date.parse(expiresAt) - this.#clock.now());
      pending.timer = this.#clock.setTimeout(() => {
        pending.timer = undefined;
        if (pending.answered) return;
        if (!this.#settleInteraction(state, pending, { outcome: "expired", local: true })) return;
        this.#withdraw(state, id, "expired");
      }, Number.isFinite(delay) ? delay : 0);
    }
    if (signal) {
      const onAbort = () => {
        if (this.#settleInteraction(state, pending, undefined, signal.reason)) {
          this.#withdraw(state, id, "withdrawn");
        }
      };
      signal.addEventListener("abort", onAbort, { once: true });
      pending.done.promise.then(
        () => signal.removeEventListener("abort", onAbort),
        () => signal.removeEventListener("abort", onAbort),
      );
    }
    pending.requested = this.#deliver("interaction.request", params, pending.stop.signal).then(
      (result) => {
        pending.platformId = result.platform_interaction_id;
        // A repeat of an interaction that already ended without an answer: nothing will follow.
        if (!pending.answered && (result.status === "expired" || result.status === "canceled")) {
          this.#settleInteraction(state, pending, { outcome: result.status, local: false });
        }
      },
      (error) => {
        if (!pending.stop.signal.aborted && !pending.answered) {
          this.#settleInteraction(state, pending, undefined, error);
        }
      },
    );
    return pending.done.promise;
  }

  resolveInteraction(state: SessionState, interactionId: string, answer: LocalAnswer): boolean {
    const pending = state.interactions.get(interactionId);
    if (!pending || pending.answered) return false;
    const settled = this.#settleInteraction(state, pending, {
      outcome: answer.outcome,
      ...(answer.answer !== undefined ? { answer: answer.answer } : {}),
      ...(answer.message !== undefined ? { message: answer.message } : {}),
      local: true,
    });
    if (settled) this.#withdraw(state, interactionId, "resolved_locally");
    return settled;
  }

  /** Settles once: with an answer, or rejected with `error`. False when already settled. */
  #settleInteraction(
    state: SessionState,
    pending: PendingInteraction,
    answer: Omit<InteractionAnswer, "interaction_id" | "platform_interaction_id"> | undefined,
    error?: unknown,
  ): boolean {
    if (state.interactions.get(pending.id) !== pending) return false;
    state.interactions.delete(pending.id);
    pending.stop.abort();
    if (pending.timer !== undefined) this.#clock.clearTimeout(pending.timer);
    if (answer) {
      pending.done.resolve({
        interaction_id: pending.id,
        ...(pending.platformId !== undefined
          ? { platform_interaction_id: pending.platformId }
          : {}),
        ...answer,
      });
    } else pending.done.reject(error);
    return true;
  }

  /** `interaction.cancel`, resent until acknowledged (idempotent by interaction_id). */
  #withdraw(state: SessionState, interactionId: string, reason: string): void {
    this.#deliver("interaction.cancel", {
      session_id: state.id,
      interaction_id: interactionId,
      reason,
    }).catch((error) => {
      if (error instanceof ClientStoppedError) return;
      this.#logger.debug("interaction.cancel not delivered", {
        session_id: state.id,
        interaction_id: interactionId,
        error: describeError(error),
      });
    });
  }

  #interactionResponse(params: InteractionResponseParams): InteractionResponseResult {
    const state = this.#sessions.get(params.session_id);
    const pending = state?.interactions.get(params.interaction_id);
    if (!state || !pending || pending.answered) return { accepted: false };
    pending.answered = true;
    const answer = {
      outcome: params.outcome,
      ...(params.answer !== undefined ? { answer: params.answer } : {}),
      ...(params.message !== undefined ? { message: params.message } : {}),
      local: false,
    };
    // The answer to the request itself may have come in the same read as this one: apply the
    // platform's answer once that is in (it names the platform id), or a macrotask later at most.
    const soon = new Promise<void>((resolve) => globalThis.setTimeout(resolve, 0));
    Promise.race([pending.requested, soon]).then(() =>
      this.#settleInteraction(state, pending, answer)
    );
    return { accepted: true };
  }

  // ---- custom tools ---------------------------------------------------------------------------

  customTool(
    state: SessionState,
    run: TurnRun,
    name: string,
    input: Record<string, unknown>,
    options: CustomToolOptions,
  ): Promise<CustomToolOutcome> {
    if (!this.#options.customTools) return rejected(new CustomToolsDisabledError());
    if (run.finished) return rejected(new TurnEndedError(run.turnId));
    if (run.controller.signal.aborted) return rejected(run.controller.signal.reason);
    const toolUseId = options.eventId ?? randomId("toolu_");
    if (state.eventIds.has(toolUseId) || state.customWaits.has(toolUseId)) {
      return rejected(new DuplicateEventIdError(toolUseId));
    }
    const wait: CustomWait = { run, done: deferred<CustomToolOutcome>(), timer: undefined };
    wait.done.promise.catch(() => {});
    // Waiting before the use is even sent: a fast result must find it.
    state.customWaits.set(toolUseId, wait);
    const emitted = this.emit(state, run, {
      type: "agent.custom_tool_use",
      name,
      input,
    }, { eventId: toolUseId });
    emitted.catch((error) => {
      if (state.customWaits.get(toolUseId) !== wait) return;
      state.customWaits.delete(toolUseId);
      if (wait.timer !== undefined) this.#clock.clearTimeout(wait.timer);
      wait.done.reject(error);
    });
    const timeoutMs = options.timeoutMs ?? this.#options.customToolTimeoutMs ??
      DEFAULT_CUSTOM_TOOL_TIMEOUT_MS;
    wait.timer = this.#clock.setTimeout(() => {
      wait.timer = undefined;
      if (state.customWaits.get(toolUseId) !== wait) return;
      // The executor owns the wait: the call ends failed, the turn goes on, a late result is refused.
      state.customWaits.delete(toolUseId);
      const content: ContentBlock[] = [{
        type: "text",
        text: `custom tool ${name} returned no result within ${timeoutMs} ms`,
      }];
      if (!run.finished) {
        this.#emit(
          state,
          run,
          {
            type: "agent.tool_result",
            tool_use_id: toolUseId,
            is_error: true,
            content,
          },
          {},
          true,
        );
      }
      wait.done.resolve({ tool_use_id: toolUseId, content, is_error: true, timed_out: true });
    }, timeoutMs);
    return wait.done.promise;
  }

  #customToolResult(params: AgentCustomToolResultParams): CustomToolResultResult {
    const state = this.#sessions.get(params.session_id);
    const wait = state?.customWaits.get(params.tool_use_id);
    if (!state || !wait) return { accepted: false };
    state.customWaits.delete(params.tool_use_id);
    if (wait.timer !== undefined) this.#clock.clearTimeout(wait.timer);
    wait.done.resolve({
      tool_use_id: params.tool_use_id,
      content: params.content ?? [],
      is_error: params.is_error ?? false,
      timed_out: false,
    });
    return { accepted: true };
  }

  // ---- tokens ---------------------------------------------------------------------------------

  token(state: SessionState, run: TurnRun, kind: "model" | "tools"): Promise<TokenView> {
    const cache = kind === "model" ? run.model : run.tools;
    const now = this.#clock.now();
    if (cache.token !== undefined && cache.expiresAt - now >= this.#leadMs) {
      return Promise.resolve(view(cache));
    }
    if (cache.methodMissing) return this.#keep(cache, kind, "the harness issues no fresh token");
    cache.inflight ??= this.#refresh(state, run, kind, cache).finally(() => {
      cache.inflight = undefined;
    });
    return cache.inflight;
  }

  async #refresh(
    state: SessionState,
    run: TurnRun,
    kind: "model" | "tools",
    cache: TokenCache,
  ): Promise<TokenView> {
    const signal = run.controller.signal;
    try {
      if (kind === "model") {
        const result = await this.#client.call("model_token.refresh", {
          session_id: state.id,
          turn_id: run.turnId,
        }, { signal });
        this.#store(cache, result.model_token, result.expires_at, result.model_base_url);
      } else {
        const result = await this.#client.call("tools_token.refresh", {
          session_id: state.id,
          turn_id: run.turnId,
          ...(run.params.metadata?.epoch !== undefined ? { epoch: run.epoch } : {}),
        }, { signal });
        this.#store(cache, result.tools_mcp_token, result.expires_at, result.tools_mcp_url);
      }
      return view(cache);
    } catch (error) {
      if (error instanceof ProtocolError && error.code === ErrorCode.METHOD_NOT_FOUND) {
        // A harness without the method: the executor keeps the token it has.
        cache.methodMissing = true;
        this.#logger.info("the harness does not refresh tokens: keeping the current one", {
          kind,
          session_id: state.id,
        });
        return this.#keep(cache, kind, "the harness does not refresh tokens (-32601)");
      }
      if (isTransient(error) && cache.token !== undefined && cache.expiresAt > this.#clock.now()) {
        return view(cache);
      }
      throw error;
    }
  }

  #store(cache: TokenCache, token: string, expiresAt: string, url: string | undefined): void {
    this.#internals.addSecret(token);
    cache.token = token;
    const parsed = Date.parse(expiresAt);
    cache.expiresAt = Number.isFinite(parsed)
      ? parsed
      : this.#clock.now() + ASSUMED_TOKEN_LIFETIME_MS;
    if (url !== undefined) cache.url = url;
  }

  #keep(cache: TokenCache, kind: "model" | "tools", why: string): Promise<TokenView> {
    if (cache.token !== undefined && cache.expiresAt > this.#clock.now()) {
      return Promise.resolve(view(cache));
    }
    const missing = cache.token === undefined ? "none came with turn.start" : "it has expired";
    return rejected(new TokenUnavailableError(kind, `${missing}, and ${why}`));
  }

  // ---- delivery -------------------------------------------------------------------------------

  /** Sends an idempotent request until the harness answers (across reconnects). */
  async #deliver<M extends ExecutorRequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    signal?: AbortSignal,
  ): Promise<RequestMap[M]["result"]> {
    const { clock, retry, random } = this.#internals;
    for (let attempt = 1;; attempt++) {
      if (signal?.aborted) throw signal.reason;
      try {
        return await this.#client.call(method, params, signal ? { signal } : {});
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if (!isTransient(error)) throw error;
        // A lost connection: the next call waits for the reconnect itself. Anything else backs off.
        if (!(error instanceof ConnectionClosedError) && !(error instanceof NotConnectedError)) {
          await sleep(clock, backoffDelay(retry, attempt, random), signal);
        }
      }
    }
  }
}

function view(cache: TokenCache): TokenView {
  return {
    token: cache.token!,
    expiresAt: cache.expiresAt,
    ...(cache.url !== undefined ? { url: cache.url } : {}),
  };
}

// ---- the turn handed to the handler ----------------------------------------------------------

class AgentTurn implements Turn {
  readonly sessionId: string;
  readonly turnId: string;
  readonly input: readonly ContentBlock[];
  readonly metadata: Readonly<TurnMetadata>;
  readonly executorSessionRef: string | undefined;
  readonly first: boolean;
  readonly inputs: AsyncIterable<TurnInput>;
  readonly #service: AgentService;
  readonly #state: SessionState;
  readonly #run: TurnRun;

  constructor(service: AgentService, state: SessionState, run: TurnRun, first: boolean) {
    this.#service = service;
    this.#state = state;
    this.#run = run;
    const params = run.params;
    this.sessionId = params.session_id;
    this.turnId = params.turn_id;
    this.input = params.input;
    const { model_token: _m, tools_mcp_token: _t, ...metadata } = params.metadata ?? {};
    this.metadata = Object.freeze(metadata);
    this.executorSessionRef = params.executor_session_ref;
    this.first = first;
    const queue = run.inputs;
    // Leaving a `for await` early must not end the inputs for the rest of the turn.
    this.inputs = {
      [Symbol.asyncIterator]: () => ({
        next: () => queue.next(),
        return: () => Promise.resolve({ value: undefined, done: true as const }),
      }),
    };
  }

  get signal(): AbortSignal {
    return this.#run.controller.signal;
  }

  takeInputs(): TurnInput[] {
    return this.#run.inputs.drain();
  }

  eventId(): string {
    return randomId("evt_");
  }

  emit(event: AgentEvent, options: EmitOptions = {}): Promise<EmittedEvent> {
    return this.#service.emit(this.#state, this.#run, event, options);
  }

  delta(eventId: string, delta: EventDelta): void {
    this.#service.delta(this.#state, this.#run, eventId, delta);
  }

  requestInteraction(
    request: InteractionRequest,
    options: { signal?: AbortSignal } = {},
  ): Promise<InteractionAnswer> {
    return this.#service.requestInteraction(this.#state, this.#run, request, options.signal);
  }

  resolveInteraction(interactionId: string, answer: LocalAnswer): boolean {
    return this.#service.resolveInteraction(this.#state, interactionId, answer);
  }

  customTool(
    name: string,
    input: Record<string, unknown>,
    options: CustomToolOptions = {},
  ): Promise<CustomToolOutcome> {
    return this.#service.customTool(this.#state, this.#run, name, input, options);
  }

  async modelToken(): Promise<ModelCredential> {
    const token = await this.#service.token(this.#state, this.#run, "model");
    return {
      token: token.token,
      expiresAt: token.expiresAt,
      ...(token.url !== undefined ? { baseUrl: token.url } : {}),
    };
  }

  toolsToken(): Promise<ToolsCredential> {
    return this.#service.token(this.#state, this.#run, "tools");
  }
}
