/**
 * The agent capability on the harness end: `new Harness({ agent: new AgentPlatform(options) })`.
 *
 * The platform keeps what the protocol needs beyond one connection:
 * - **turns**: which turn of which session is active on which executor (pending, running, or
 *   ended with an outcome), so tokens are signed only for an active turn routed to the asking
 *   executor (and, for tools tokens, from the turn's current epoch);
 * - **interactions**: one platform interaction per request, idempotent by `interaction_id`; an
 *   `appr_` + 24 hex id is adopted as the platform id and names the same interaction after an
 *   executor restart, a conflicting reuse is refused (-32013) and leaves it unchanged, any other
 *   id gets an `int_…` id; answers are delivered until the executor answers;
 * - **streams**: durable agent events (deduplicated and ordered by the harness's event log)
 *   and their deltas, relayed to subscribers as `event_start` / `event_delta` / `event`.
 *
 * Portable: web-standard APIs only.
 */
import {
  type AgentHarnessLink,
  type AgentHost,
  type CloseAgentSessionOptions,
  registerAgentHost,
  type TurnInputRequest,
} from "../harness/agent-host.ts";
import { afterReply, type ExecutorEvent } from "../harness/context.ts";
import { ExecutorUnavailableError, HarnessClosedError } from "../harness/errors.ts";
import type { SessionEventRecord } from "../harness/event-log.ts";
import { executorControl, type ExecutorHandle } from "../harness/executor-handle.ts";
import { Deadline } from "../harness/lease.ts";
import { type Session, sessionControl } from "../harness/session.ts";
import { backoffDelay, type BackoffPolicy, sleep } from "../executor/timing.ts";
import { hasCapability } from "../protocol/capabilities.ts";
import { type Clock, systemClock, type TimerHandle } from "../protocol/clock.ts";
import {
  CapabilityNotAdvertisedError,
  ConnectionClosedError,
  LocalError,
  ProtocolError,
  RequestAbortedError,
  RequestTimeoutError,
} from "../protocol/errors.ts";
import type {
  Ack,
  AgentCustomToolResultParams,
  AgentEvent,
  CustomToolResultResult,
  EventDelta,
  HarnessRequestMethod,
  InteractionCancelParams,
  InteractionKind,
  InteractionOption,
  InteractionOutcome,
  InteractionRequestParams,
  InteractionRequestResult,
  InteractionResponseParams,
  InteractionResponseResult,
  ModelTokenRefreshParams,
  ModelTokenRefreshResult,
  RequestMap,
  SessionCloseResult,
  SessionEventDeltaParams,
  ToolsTokenRefreshParams,
  ToolsTokenRefreshResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnOutcome,
  TurnStartParams,
  TurnStartResult,
} from "../protocol/generated/contract.ts";
import {
  CapabilityMissingError,
  ConflictError,
  ErrorCode,
  ForbiddenError,
  TurnInactiveError,
} from "../protocol/generated/errors.ts";
import { type Logger, silentLogger } from "../protocol/logger.ts";
import type { CallOptions, Disposable } from "../protocol/peer.ts";
import { isApprovalId, randomId } from "./ids.ts";
import { BoundedSet } from "../protocol/bounded-set.ts";
import { AsyncQueue } from "./queue.ts";

/** Where a turn is, as the platform tracks it. Active: `pending` and `running`. */
export type AgentTurnState = "pending" | "running" | TurnOutcome;

/** A turn as the platform tracks it. */
export interface AgentTurnInfo {
  /** The session the turn belongs to. */
  readonly session_id: string;
  /** The turn's id (`turn.start`). */
  readonly turn_id: string;
  /** The executor the turn's session is routed to. */
  readonly executor_id: string;
  /** Where the turn is: pending, running, or how it ended. */
  readonly state: AgentTurnState;
  /** The turn's binding epoch (`turn.start` metadata); tools tokens are bound to it. */
  readonly epoch: number;
  /** Pending or running: the turn may still get tokens. */
  readonly active: boolean;
}

/** A model token your issuer signed. */
export interface ModelTokenGrant {
  /** The signed model token (a secret: never logged). */
  readonly model_token: string;
  /** Expiry: an ISO date-time, a `Date`, or ms since the epoch. */
  readonly expires_at: string | Date | number;
  /** The base URL to use it with, when it changed. */
  readonly model_base_url?: string;
}

/** A platform tools token your issuer signed. */
export interface ToolsTokenGrant {
  /** The signed tools token (a secret: never logged). */
  readonly tools_mcp_token: string;
  /** Expiry: an ISO date-time, a `Date`, or ms since the epoch. */
  readonly expires_at: string | Date | number;
  /** The tools MCP URL to use it with, when it changed. */
  readonly tools_mcp_url?: string;
}

/** What a subscriber of {@linkcode AgentPlatform.stream} receives. */
export type AgentStreamEvent =
  /** The first delta of a durable event arrived: its preview starts. */
  | {
    readonly type: "event_start";
    readonly session_id: string;
    readonly turn_id: string;
    readonly event_id: string;
  }
  /** One preview fragment (lossy). */
  | {
    readonly type: "event_delta";
    readonly session_id: string;
    readonly turn_id: string;
    readonly event_id: string;
    readonly index?: number;
    readonly delta: EventDelta;
  }
  /** A durable event, once, in sequence order. */
  | { readonly type: "event"; readonly record: SessionEventRecord };

/** Where a platform interaction is. */
export type InteractionStatus = "open" | "resolved" | "expired" | "canceled";

/** A platform interaction (a snapshot). */
export interface PlatformInteraction {
  /** The platform id: the `appr_…` id itself, or `int_…`. */
  readonly id: string;
  /** The executor's `interaction_id`. */
  readonly interaction_id: string;
  /** The session that asked. */
  readonly session_id: string;
  /** The turn that asked. */
  readonly turn_id: string;
  /** The executor that asked (answers go to the one that asked last). */
  readonly executor_id: string;
  /** What is asked: a permission, a question, ... */
  readonly kind: InteractionKind;
  /** The `agent.tool_use` event a permission is about. */
  readonly tool_use_id?: string;
  /** A short title for the card. */
  readonly title?: string;
  /** What the user is asked. */
  readonly prompt?: string;
  /** The choices offered, when the answer is one of them. */
  readonly options?: readonly InteractionOption[];
  /** When the executor stops waiting (an ISO date-time). */
  readonly expires_at?: string;
  /** Open, resolved, expired or canceled. */
  readonly status: InteractionStatus;
  /** How it was answered, once settled. */
  readonly outcome?: InteractionOutcome;
  /** The chosen option id or free text, once answered. */
  readonly answer?: string;
  /** A note with the answer (e.g. why denied). */
  readonly message?: string;
  /** Why the executor withdrew it (`interaction.cancel`). */
  readonly cancel_reason?: string;
  /** How many `interaction.request`s named it (repeats, restarts). */
  readonly requests: number;
}

/** A change of a platform interaction. */
export interface InteractionChange {
  /**
   * `opened`: a new interaction (show it); `repeated`: a repeat named it again (e.g. after an
   * executor restart; still one interaction); `settled`: answered or expired; `canceled`: the
   * executor withdrew it (dismiss it).
   */
  readonly type: "opened" | "repeated" | "settled" | "canceled";
  /** The interaction after the change. */
  readonly interaction: PlatformInteraction;
}

/** An answer to a platform interaction. */
export interface PlatformAnswer {
  /** `approved`, `denied`, `answered`, `expired` or `canceled`. */
  outcome: InteractionOutcome;
  /** The chosen option id, or free text. */
  answer?: string;
  /** An optional note (e.g. why denied). */
  message?: string;
}

/** Options of an {@linkcode AgentPlatform}. */
export interface AgentPlatformOptions {
  /**
   * Signs model tokens (`model_token.refresh`) for an active turn routed to the asking
   * executor. Throw a `ForbiddenError` to refuse one (e.g. not entitled). Absent: -32012
   * `model_token_unavailable`.
   */
  modelTokens?: (turn: AgentTurnInfo) => ModelTokenGrant | Promise<ModelTokenGrant>;
  /** Signs platform tools tokens (`tools_token.refresh`). Absent: -32012 `tools_token_unavailable`. */
  toolsTokens?: (turn: AgentTurnInfo) => ToolsTokenGrant | Promise<ToolsTokenGrant>;
  /**
   * Stores each durable agent event before it is acknowledged (after `onSessionEvent` of the
   * harness). Throwing refuses the event; the executor sends it again.
   */
  onEvent?: (record: SessionEventRecord) => void | Promise<void>;
  /** Receives every interaction change (show, update, dismiss cards). */
  onInteraction?: (change: InteractionChange) => void;
  /** Backoff of resent requests (answers, results, turn starts). Default 250 ms to 10 s. */
  retry?: BackoffPolicy;
  /** Randomness for the backoff jitter. Default `Math.random`. */
  random?: () => number;
  /** Deltas kept per subscriber that lags behind; more are dropped (they are lossy). Default 1,000. */
  maxBufferedDeltas?: number;
  /**
   * Settled interactions and ended sessions remembered (oldest forgotten first): what lets an
   * approval id repeated after a restart find its interaction, and a restarted executor find its
   * `executor_session_ref`. Default 10,000 of each.
   */
  remember?: number;
}

/** Options of {@linkcode AgentPlatform.stream}. */
export interface StreamOptions {
  /** Ends the stream. */
  signal?: AbortSignal;
}

/** Options of {@linkcode AgentPlatform.waitInteraction}. */
export interface WaitInteractionOptions {
  /** Which interaction. Default: any open one. */
  filter?: (interaction: PlatformInteraction) => boolean;
  /** Stops waiting (rejects with `RequestAbortedError`). */
  signal?: AbortSignal;
}

/** The platform was not given to a `Harness` (`new Harness({ agent: platform })`) yet. */
export class AgentPlatformDetachedError extends LocalError {
  constructor() {
    super("the agent platform is not attached to a Harness");
    this.name = "AgentPlatformDetachedError";
  }
}

const ACTIVE: ReadonlySet<AgentTurnState> = new Set(["pending", "running"]);

interface TurnRecord {
  readonly sessionId: string;
  readonly turnId: string;
  readonly executorId: string;
  state: AgentTurnState;
  epoch: number;
}

interface SessionRecord {
  readonly id: string;
  readonly executor: ExecutorHandle;
  readonly session: Session;
  readonly turns: Map<string, TurnRecord>;
  current: TurnRecord | undefined;
  ref: string | undefined;
  /** Event ids whose preview started (an `event_start` went out). */
  readonly started: BoundedSet<string>;
  /** Event ids of durable events: their previews are over. */
  readonly finalized: BoundedSet<string>;
  /** Custom tool uses: tool_use_id → turn_id. */
  readonly toolUses: Map<string, string>;
  /** Custom tool results taken (the first per tool_use_id counts). */
  readonly results: BoundedSet<string>;
  /** `closeAgentSession` was sent: a new turn waits for `session.ended`. */
  closing: boolean;
}

interface StoredInteraction {
  readonly id: string;
  readonly key: string;
  readonly interactionId: string;
  readonly sessionId: string;
  readonly kind: InteractionKind;
  turnId: string;
  toolUseId: string | undefined;
  readonly title: string | undefined;
  readonly prompt: string | undefined;
  readonly options: InteractionOption[] | undefined;
  readonly expiresAt: string | undefined;
  executor: ExecutorHandle;
  /** The executor's registration epoch when it last asked. */
  executorEpoch: number;
  status: InteractionStatus;
  outcome: InteractionOutcome | undefined;
  answer: string | undefined;
  message: string | undefined;
  cancelReason: string | undefined;
  requests: number;
  timer: TimerHandle | undefined;
  /** The "opened" change went out (after the request's answer). */
  announced: boolean;
}

/** The harness end of the agent capability. */
export class AgentPlatform {
  readonly #options: AgentPlatformOptions;
  readonly #sessions = new Map<string, SessionRecord>();
  readonly #interactions = new Map<string, StoredInteraction>();
  readonly #byPlatformId = new Map<string, StoredInteraction>();
  readonly #streams = new Map<string, Set<AsyncQueue<AgentStreamEvent>>>();
  readonly #listeners = new Set<(change: InteractionChange) => void>();
  /** Settled interactions and ended sessions, oldest first, for forgetting. */
  readonly #settled: BoundedSet<StoredInteraction>;
  readonly #ended: BoundedSet<SessionRecord>;
  #link: AgentHarnessLink | undefined;

  /** A platform with nothing attached yet: pass it to `new Harness({ agent })`. */
  constructor(options: AgentPlatformOptions = {}) {
    this.#options = options;
    this.#settled = new BoundedSet(options.remember ?? 10_000);
    this.#ended = new BoundedSet(options.remember ?? 10_000);
    if (options.onInteraction) this.#listeners.add(options.onInteraction);
    const host: AgentHost = {
      attach: (link) => {
        if (this.#link) throw new LocalError("an AgentPlatform serves one Harness");
        this.#link = link;
      },
      acceptEvent: (record) => this.#acceptEvent(record),
      startTurn: (executor, params, options) => this.#startTurn(executor, params, options),
      sendTurnInput: (executor, params, options) => this.#sendTurnInput(executor, params, options),
      cancelTurn: (executor, params, options) => this.#cancelTurn(executor, params, options),
      closeAgentSession: (executor, id, options) => this.#closeSession(executor, id, options),
      respondInteraction: (executor, params, options) =>
        this.#respondInteraction(executor, params, options),
      sendCustomToolResult: (executor, params, options) =>
        this.#sendCustomToolResult(executor, params, options),
      delta: (executor, params) => this.#delta(executor, params),
      requestInteraction: (executor, params) => this.#requestInteraction(executor, params),
      cancelInteraction: (executor, params) => this.#cancelInteraction(executor, params),
      modelToken: (executor, params) => this.#modelToken(executor, params),
      toolsToken: (executor, params) => this.#toolsToken(executor, params),
    };
    registerAgentHost(this, host);
  }

  // ---- public API -----------------------------------------------------------------------------

  /**
   * Subscribes to a session's agent stream from now on: `event_start` and `event_delta` for
   * previews (lossy), and each durable event once, in sequence order (`event`). Ends when the
   * session ends, `signal` aborts, or the reader stops early.
   */
  stream(sessionId: string, options: StreamOptions = {}): AsyncIterableIterator<AgentStreamEvent> {
    const queue = new AsyncQueue<AgentStreamEvent>();
    let set = this.#streams.get(sessionId);
    if (!set) this.#streams.set(sessionId, set = new Set());
    set.add(queue);
    const remove = () => {
      queue.end();
      const current = this.#streams.get(sessionId);
      current?.delete(queue);
      if (current?.size === 0) this.#streams.delete(sessionId);
    };
    const signal = options.signal;
    if (signal?.aborted) remove();
    signal?.addEventListener("abort", remove, { once: true });
    const iterator: AsyncIterableIterator<AgentStreamEvent> = {
      next: () => queue.next(),
      return: () => {
        remove();
        return queue.return();
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** Every interaction the platform holds (snapshots), oldest first. */
  get interactions(): PlatformInteraction[] {
    return [...this.#byPlatformId.values()].map(snapshot);
  }

  /** An interaction by its platform id. */
  interaction(id: string): PlatformInteraction | undefined {
    const stored = this.#byPlatformId.get(id);
    return stored ? snapshot(stored) : undefined;
  }

  /** Calls `listener` on every interaction change. */
  onInteraction(listener: (change: InteractionChange) => void): Disposable {
    this.#listeners.add(listener);
    return { dispose: () => void this.#listeners.delete(listener) };
  }

  /** Resolves with an open interaction matching `filter`: one held now, else the next opened. */
  waitInteraction(options: WaitInteractionOptions = {}): Promise<PlatformInteraction> {
    const filter = options.filter ?? (() => true);
    const signal = options.signal;
    return new Promise((resolve, reject) => {
      for (const stored of this.#byPlatformId.values()) {
        if (!stored.announced) continue;
        const view = snapshot(stored);
        if (view.status === "open" && filter(view)) return resolve(view);
      }
      if (signal?.aborted) {
        return reject(new RequestAbortedError("waitInteraction", signal.reason));
      }
      const onAbort = () => {
        sub.dispose();
        reject(new RequestAbortedError("waitInteraction", signal!.reason));
      };
      const sub = this.onInteraction((change) => {
        const view = change.interaction;
        if (view.status !== "open" || !filter(view)) return;
        sub.dispose();
        signal?.removeEventListener("abort", onAbort);
        resolve(view);
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Answers an open interaction: the first answer wins (false for a settled or unknown one).
   * The answer goes to the executor that asked last (`interaction.response`), resent until it
   * answers; after an executor restart, its repeat of an `appr_…` request gets it too.
   */
  respond(id: string, answer: PlatformAnswer): boolean {
    const stored = this.#byPlatformId.get(id);
    if (!stored || !this.#settle(stored, answer)) return false;
    this.#deliverAnswer(stored);
    return true;
  }

  /** The session's current (latest started) turn. */
  turn(sessionId: string): AgentTurnInfo | undefined {
    const turn = this.#sessions.get(sessionId)?.current;
    return turn ? turnInfo(turn) : undefined;
  }

  /** A turn of a live session by id. */
  turnById(sessionId: string, turnId: string): AgentTurnInfo | undefined {
    const turn = this.#sessions.get(sessionId)?.turns.get(turnId);
    return turn ? turnInfo(turn) : undefined;
  }

  /** The latest `executor_session_ref` the session's executor returned (send it back on resume). */
  executorSessionRef(sessionId: string): string | undefined {
    return this.#sessions.get(sessionId)?.ref;
  }

  // ---- wiring ---------------------------------------------------------------------------------

  get #clock(): Clock {
    return this.#link?.clock ?? systemClock;
  }

  get #logger(): Logger {
    return this.#link?.logger ?? silentLogger;
  }

  /** The record of `sessionId` on `executor`, opening the harness session when needed. */
  #open(executor: ExecutorHandle, sessionId: string): { record: SessionRecord; created: boolean } {
    const session = executorControl(executor).openAgentSession(sessionId);
    const known = this.#sessions.get(sessionId);
    if (known && known.session === session) return { record: known, created: false };
    const record: SessionRecord = {
      id: sessionId,
      executor,
      session,
      turns: new Map(),
      current: undefined,
      ref: known?.executor === executor ? known.ref : undefined,
      started: new BoundedSet<string>(10_000),
      finalized: new BoundedSet<string>(10_000),
      toolUses: new Map(),
      results: new BoundedSet<string>(10_000),
      closing: false,
    };
    this.#sessions.set(sessionId, record);
    session.ended.then(() => this.#sessionEnded(record));
    return { record, created: true };
  }

  #sessionEnded(record: SessionRecord): void {
    // A session that ended (closed, lost, stopped) takes its turns with it: no more tokens.
    for (const turn of record.turns.values()) {
      if (ACTIVE.has(turn.state)) turn.state = "failed";
    }
    const oldest = this.#ended.add(record);
    if (oldest && this.#sessions.get(oldest.id) === oldest) this.#sessions.delete(oldest.id);
    if (this.#sessions.get(record.id) !== record) return;
    // The record stays (its ref lets a restarted executor resume); its streams end.
    const streams = this.#streams.get(record.id);
    this.#streams.delete(record.id);
    for (const queue of streams ?? []) queue.end();
  }

  /** The routed record of a session, or -32001. */
  #routed(executor: ExecutorHandle, sessionId: string): SessionRecord {
    const record = this.#sessions.get(sessionId);
    if (!record || record.executor !== executor || record.session.state === "ended") {
      throw new ForbiddenError("the session is not routed to this executor", {
        reason: "forbidden",
      });
    }
    return record;
  }

  /** An active turn of a session routed to `executor`, or the contract's refusal. */
  #activeTurn(executor: ExecutorHandle, sessionId: string, turnId: string): TurnRecord {
    const turn = this.#routed(executor, sessionId).turns.get(turnId);
    if (!turn) throw new ForbiddenError("unknown turn", { reason: "forbidden" });
    if (!ACTIVE.has(turn.state)) {
      throw new TurnInactiveError("the turn is not active", { reason: "turn_inactive" });
    }
    return turn;
  }

  #publish(sessionId: string, item: AgentStreamEvent, lossy: boolean): void {
    const queues = this.#streams.get(sessionId);
    if (!queues) return;
    const limit = this.#options.maxBufferedDeltas ?? 1_000;
    for (const queue of queues) {
      if (lossy && queue.size >= limit) continue;
      queue.push(item);
    }
  }

  // ---- turns (harness → executor) --------------------------------------------------------------

  async #startTurn(
    executor: ExecutorHandle,
    params: TurnStartParams,
    options: CallOptions,
  ): Promise<TurnStartResult> {
    if (executor.gone) throw new ExecutorUnavailableError(executor.id, "gone");
    const closing = this.#sessions.get(params.session_id);
    if (closing?.closing && closing.session.state !== "ended") {
      // The same id after session.close is a new conversation: it starts once the old one ended.
      await closing.session.ended;
    }
    const { record, created } = this.#open(executor, params.session_id);
    const epoch = params.metadata?.epoch;
    let turn = record.turns.get(params.turn_id);
    const newTurn = turn === undefined;
    if (!turn) {
      turn = {
        sessionId: params.session_id,
        turnId: params.turn_id,
        executorId: executor.id,
        state: "pending",
        epoch: epoch ?? 0,
      };
      record.turns.set(params.turn_id, turn);
    } else if (epoch !== undefined && epoch > turn.epoch) {
      // Started again in a newer epoch: tokens of the older epoch end here.
      turn.epoch = epoch;
    }
    const previous = record.current;
    record.current = turn;
    try {
      const result = await this.#deliver(executor, "turn.start", params, options);
      if (turn.state === "pending") turn.state = "running";
      if (result.executor_session_ref !== undefined) record.ref = result.executor_session_ref;
      return result;
    } catch (error) {
      if (newTurn) {
        record.turns.delete(params.turn_id);
        if (record.current === turn) record.current = previous;
      }
      if (created && record.turns.size === 0 && record.session.state !== "ended") {
        sessionControl(record.session).end("refused", "session_ended");
      }
      throw error;
    }
  }

  #sendTurnInput(
    executor: ExecutorHandle,
    params: TurnInputRequest,
    options: CallOptions,
  ): Promise<Ack> {
    return this.#deliver(executor, "turn.input", {
      ...params,
      input_id: params.input_id ?? randomId("input_"),
    }, options);
  }

  #cancelTurn(
    executor: ExecutorHandle,
    params: TurnCancelParams,
    options: CallOptions,
  ): Promise<TurnCancelResult> {
    const record = this.#sessions.get(params.session_id);
    if (record?.executor === executor) {
      const turn = params.turn_id !== undefined ? record.turns.get(params.turn_id) : record.current;
      // Canceled from now on: no more tokens, even before the executor's idle event.
      if (turn && ACTIVE.has(turn.state)) turn.state = "canceled";
    }
    return this.#deliver(executor, "turn.cancel", params, options);
  }

  async #closeSession(
    executor: ExecutorHandle,
    sessionId: string,
    options: CloseAgentSessionOptions,
  ): Promise<SessionCloseResult> {
    const record = this.#sessions.get(sessionId);
    const session = record?.executor === executor
      ? record.session
      : executor.sessions.get(sessionId);
    if (record?.executor === executor) {
      record.closing = true;
      for (const turn of record.turns.values()) {
        if (ACTIVE.has(turn.state)) turn.state = "canceled";
      }
    }
    const signal = options.signal;
    const result = await this.#deliver(executor, "session.close", {
      session_id: sessionId,
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
    }, signal ? { signal } : {});
    if (!session || session.state === "ended") return result;
    if (!result.closed) {
      // The executor does not hold it: there is no session.ended to wait for.
      sessionControl(session).end(options.reason ?? "closed", "session_ended");
      return result;
    }
    // Every wait ends: an executor that never sends session.ended does not hold the caller.
    const deadline = new Deadline(this.#clock, () => {
      this.#logger.warn("session.ended did not arrive after session.close: ending the session", {
        session_id: sessionId,
      });
      sessionControl(session).end("close_timeout", "session_ended");
    });
    deadline.set(this.#clock.now() + (options.timeoutMs ?? 60_000));
    session.ended.then(() => deadline.cancel());
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => reject(new RequestAbortedError("session.close", signal!.reason));
      if (signal?.aborted) onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      session.ended.then(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
    });
    return result;
  }

  // ---- events and deltas (executor → harness) --------------------------------------------------

  async #acceptEvent(record: SessionEventRecord): Promise<void> {
    if (this.#options.onEvent) await this.#options.onEvent(record);
    const session = this.#sessions.get(record.session_id);
    const eventId = record.event_id!;
    if (session) {
      const event = record.event as unknown as AgentEvent;
      const turn = record.turn_id !== undefined ? session.turns.get(record.turn_id) : undefined;
      if (event.type === "session.status_idle" && turn && ACTIVE.has(turn.state)) {
        turn.state = event.turn_outcome;
      }
      if (event.type === "agent.custom_tool_use" && record.turn_id !== undefined) {
        session.toolUses.set(eventId, record.turn_id);
      }
      if (event.type === "agent.tool_result") session.toolUses.delete(event.tool_use_id);
      session.finalized.add(eventId);
      session.started.delete(eventId);
    }
    this.#publish(record.session_id, { type: "event", record }, false);
  }

  #delta(executor: ExecutorHandle, params: SessionEventDeltaParams): void {
    const record = this.#sessions.get(params.session_id);
    // Lossy: a preview of a session elsewhere, or of an event already final, is dropped.
    if (!record || record.executor !== executor || record.finalized.has(params.event_id)) return;
    const base = {
      session_id: params.session_id,
      turn_id: params.turn_id,
      event_id: params.event_id,
    };
    if (!record.started.has(params.event_id)) {
      record.started.add(params.event_id);
      this.#publish(params.session_id, { type: "event_start", ...base }, true);
    }
    this.#publish(params.session_id, {
      type: "event_delta",
      ...base,
      ...(params.index !== undefined ? { index: params.index } : {}),
      delta: params.delta,
    }, true);
  }

  // ---- interactions ------------------------------------------------------------------------------

  #key(executor: ExecutorHandle, sessionId: string, interactionId: string): string {
    // An approval id is the platform's own id; any other id is only this executor's key.
    return isApprovalId(interactionId)
      ? interactionId
      : `${executor.id}\u0000${sessionId}\u0000${interactionId}`;
  }

  #requestInteraction(
    executor: ExecutorHandle,
    params: InteractionRequestParams,
  ): Promise<InteractionRequestResult> {
    const turn = this.#activeTurn(executor, params.session_id, params.turn_id);
    const key = this.#key(executor, params.session_id, params.interaction_id);
    const epoch = executorControl(executor).epoch;
    const existing = this.#interactions.get(key);
    if (existing) {
      const sameEpoch = existing.executor === executor && existing.executorEpoch === epoch;
      if (
        existing.kind !== params.kind || existing.sessionId !== params.session_id ||
        (sameEpoch && existing.toolUseId !== params.tool_use_id)
      ) {
        throw new ConflictError("interaction_id names another interaction", {
          reason: "interaction_mismatch",
        });
      }
      // The same interaction, named again (a resend, or a restarted executor): route it here.
      existing.executor = executor;
      existing.executorEpoch = epoch;
      existing.turnId = turn.turnId;
      existing.toolUseId = params.tool_use_id;
      existing.requests++;
      afterReply(() => this.#notify("repeated", existing));
      // A restarted executor waits for the answer it lost: send it again.
      if (existing.status === "resolved") {
        afterReply(() => this.#deliverAnswer(existing));
      }
      return Promise.resolve(this.#requestResult(existing));
    }
    const id = isApprovalId(params.interaction_id) ? params.interaction_id : randomId("int_");
    const stored: StoredInteraction = {
      id,
      key,
      interactionId: params.interaction_id,
      sessionId: params.session_id,
      kind: params.kind,
      turnId: turn.turnId,
      toolUseId: params.tool_use_id,
      title: params.title,
      prompt: params.prompt,
      options: params.options,
      expiresAt: params.expires_at,
      executor,
      executorEpoch: epoch,
      status: "open",
      outcome: undefined,
      answer: undefined,
      message: undefined,
      cancelReason: undefined,
      requests: 1,
      timer: undefined,
      announced: false,
    };
    this.#interactions.set(key, stored);
    this.#byPlatformId.set(id, stored);
    if (params.expires_at !== undefined) {
      const at = Date.parse(params.expires_at);
      stored.timer = this.#clock.setTimeout(() => {
        stored.timer = undefined;
        if (this.#settle(stored, { outcome: "expired" })) this.#deliverAnswer(stored);
      }, Number.isFinite(at) ? Math.max(0, at - this.#clock.now()) : 0);
    }
    // Announced once the answer is on the wire, so an answer cannot overtake it.
    afterReply(() => {
      stored.announced = true;
      this.#notify("opened", stored);
    });
    return Promise.resolve(this.#requestResult(stored));
  }

  #requestResult(stored: StoredInteraction): InteractionRequestResult {
    return {
      interaction_id: stored.interactionId,
      platform_interaction_id: stored.id,
      status: stored.status,
    };
  }

  #cancelInteraction(executor: ExecutorHandle, params: InteractionCancelParams): Ack {
    const stored = this.#interactions.get(
      this.#key(executor, params.session_id, params.interaction_id),
    );
    if (!stored || stored.status !== "open") return { ok: true, duplicate: true };
    if (stored.executor !== executor) {
      throw new ForbiddenError("the interaction belongs to another executor", {
        reason: "forbidden",
      });
    }
    stored.status = "canceled";
    stored.outcome = "canceled";
    stored.cancelReason = params.reason;
    if (stored.timer !== undefined) this.#clock.clearTimeout(stored.timer);
    stored.timer = undefined;
    this.#notify("canceled", stored);
    this.#retire(stored);
    return { ok: true };
  }

  /** Records the first answer; false when the interaction was settled already. */
  #settle(stored: StoredInteraction, answer: PlatformAnswer): boolean {
    if (stored.status !== "open") return false;
    stored.status = answer.outcome === "expired"
      ? "expired"
      : answer.outcome === "canceled"
      ? "canceled"
      : "resolved";
    stored.outcome = answer.outcome;
    stored.answer = answer.answer;
    stored.message = answer.message;
    if (stored.timer !== undefined) this.#clock.clearTimeout(stored.timer);
    stored.timer = undefined;
    this.#notify("settled", stored);
    this.#retire(stored);
    return true;
  }

  /** Remembers a settled interaction; the oldest beyond the limit are forgotten. */
  #retire(stored: StoredInteraction): void {
    const oldest = this.#settled.add(stored);
    if (!oldest) return;
    if (this.#interactions.get(oldest.key) === oldest) this.#interactions.delete(oldest.key);
    if (this.#byPlatformId.get(oldest.id) === oldest) this.#byPlatformId.delete(oldest.id);
  }

  #deliverAnswer(stored: StoredInteraction): void {
    const params: InteractionResponseParams = {
      session_id: stored.sessionId,
      interaction_id: stored.interactionId,
      outcome: stored.outcome!,
      ...(stored.answer !== undefined ? { answer: stored.answer } : {}),
      ...(stored.message !== undefined ? { message: stored.message } : {}),
    };
    this.#deliver(stored.executor, "interaction.response", params, {}).catch((error) => {
      this.#logger.info("interaction answer not delivered", {
        interaction_id: stored.id,
        error: String(error),
      });
    });
  }

  #respondInteraction(
    executor: ExecutorHandle,
    params: InteractionResponseParams,
    options: CallOptions,
  ): Promise<InteractionResponseResult> {
    const stored = this.#interactions.get(
      this.#key(executor, params.session_id, params.interaction_id),
    );
    if (stored) this.#settle(stored, params);
    return this.#deliver(executor, "interaction.response", params, options);
  }

  #notify(type: InteractionChange["type"], stored: StoredInteraction): void {
    const change: InteractionChange = { type, interaction: snapshot(stored) };
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch (error) {
        this.#logger.warn("interaction listener failed", { error: String(error) });
      }
    }
  }

  // ---- custom tools ------------------------------------------------------------------------------

  async #sendCustomToolResult(
    executor: ExecutorHandle,
    params: AgentCustomToolResultParams,
    options: CallOptions,
  ): Promise<CustomToolResultResult> {
    if (!hasCapability(executor.capabilities, "agent.custom_tools")) {
      throw new CapabilityNotAdvertisedError("agent.custom_tool_result", "agent.custom_tools");
    }
    const record = this.#sessions.get(params.session_id);
    const mine = record?.executor === executor ? record : undefined;
    // The platform takes one result per call; later ones are refused without a send.
    if (mine?.results.has(params.tool_use_id)) return { accepted: false };
    mine?.results.add(params.tool_use_id);
    const ended = () => {
      const turnId = mine?.toolUses.get(params.tool_use_id);
      const turn = turnId !== undefined ? mine?.turns.get(turnId) : undefined;
      return turn !== undefined && !ACTIVE.has(turn.state);
    };
    // A result for a turn that ended is dropped: the executor no longer waits for it.
    if (ended()) return { accepted: false };
    return await this.#deliver(
      executor,
      "agent.custom_tool_result",
      params,
      options,
      undefined,
      () => ended() ? { accepted: false } : undefined,
    );
  }

  // ---- tokens ------------------------------------------------------------------------------------

  async #modelToken(
    executor: ExecutorHandle,
    params: ModelTokenRefreshParams,
  ): Promise<ModelTokenRefreshResult> {
    const turn = this.#activeTurn(executor, params.session_id, params.turn_id);
    const issue = this.#options.modelTokens;
    if (!issue) {
      throw new CapabilityMissingError("the platform issues no model token", {
        reason: "model_token_unavailable",
        capability: "agent",
      });
    }
    const grant = await issue(turnInfo(turn));
    return {
      model_token: grant.model_token,
      expires_at: isoDate(grant.expires_at),
      ...(grant.model_base_url !== undefined ? { model_base_url: grant.model_base_url } : {}),
    };
  }

  async #toolsToken(
    executor: ExecutorHandle,
    params: ToolsTokenRefreshParams,
  ): Promise<ToolsTokenRefreshResult> {
    const turn = this.#activeTurn(executor, params.session_id, params.turn_id);
    if (params.epoch !== undefined && params.epoch !== turn.epoch) {
      // Only the turn's current epoch gets tools tokens.
      throw new TurnInactiveError("the turn runs in a newer epoch", { reason: "turn_inactive" });
    }
    const issue = this.#options.toolsTokens;
    if (!issue) {
      throw new CapabilityMissingError("the platform issues no tools token for this turn", {
        reason: "tools_token_unavailable",
        capability: "agent",
      });
    }
    const grant = await issue(turnInfo(turn));
    return {
      tools_mcp_token: grant.tools_mcp_token,
      expires_at: isoDate(grant.expires_at),
      ...(grant.tools_mcp_url !== undefined ? { tools_mcp_url: grant.tools_mcp_url } : {}),
    };
  }

  // ---- delivery ----------------------------------------------------------------------------------

  /**
   * Sends an idempotent request until the executor answers: across reconnects within the lease;
   * it stops when the executor is gone (`ExecutorUnavailableError`), `signal` aborts, or `stop`
   * returns an answer to use instead.
   */
  async #deliver<M extends HarnessRequestMethod>(
    executor: ExecutorHandle,
    method: M,
    params: RequestMap[M]["params"],
    options: CallOptions,
    retryable: (error: unknown) => boolean = deliveryRetryable,
    stop?: () => RequestMap[M]["result"] | undefined,
  ): Promise<RequestMap[M]["result"]> {
    const signal = options.signal;
    const retry = this.#options.retry ?? { initialDelayMs: 250, maxDelayMs: 10_000 };
    for (let attempt = 1;; attempt++) {
      if (signal?.aborted) throw new RequestAbortedError(method, signal.reason);
      const instead = stop?.();
      if (instead !== undefined) return instead;
      if (executor.gone) throw new ExecutorUnavailableError(executor.id, "gone");
      if (!executor.connected) {
        await this.#reconnected(executor, method, signal);
        continue;
      }
      try {
        return await executor.request(method, params, options);
      } catch (error) {
        if (!retryable(error)) throw error;
        if (error instanceof RequestTimeoutError || error instanceof ProtocolError) {
          try {
            await sleep(
              this.#clock,
              backoffDelay(retry, attempt, this.#options.random ?? Math.random),
              signal,
            );
          } catch {
            throw new RequestAbortedError(method, signal?.reason);
          }
        }
      }
    }
  }

  /** Resolves once `executor` is connected again; rejects when it is gone or `signal` aborts. */
  #reconnected(executor: ExecutorHandle, method: string, signal?: AbortSignal): Promise<void> {
    const link = this.#link;
    if (!link) return Promise.reject(new AgentPlatformDetachedError());
    return new Promise((resolve, reject) => {
      const done = (settle: () => void) => {
        sub.dispose();
        signal?.removeEventListener("abort", onAbort);
        settle();
      };
      const onAbort = () => done(() => reject(new RequestAbortedError(method, signal!.reason)));
      const sub = link.onExecutor((event: ExecutorEvent) => {
        if (event.executor !== executor) return;
        if (event.type === "gone") {
          done(() => reject(new ExecutorUnavailableError(executor.id, "gone")));
        } else if (executor.connected) done(resolve);
      });
      signal?.addEventListener("abort", onAbort, { once: true });
      // It may have come back (or gone) before the listener was in place.
      if (signal?.aborted) onAbort();
      else if (executor.gone) done(() => reject(new ExecutorUnavailableError(executor.id, "gone")));
      else if (executor.connected) done(resolve);
    });
  }
}

/**
 * Errors after which a request to the executor is sent again: a lost connection or answer, and
 * -32004 (a session still closing) except `draining`, which the caller must see, as -32009.
 */
function deliveryRetryable(error: unknown): boolean {
  if (error instanceof ConnectionClosedError || error instanceof RequestTimeoutError) return true;
  if (error instanceof ExecutorUnavailableError) return error.reason === "disconnected";
  if (error instanceof HarnessClosedError) return false;
  return error instanceof ProtocolError && error.code === ErrorCode.UNAVAILABLE &&
    error.reason !== "draining";
}

function turnInfo(turn: TurnRecord): AgentTurnInfo {
  return {
    session_id: turn.sessionId,
    turn_id: turn.turnId,
    executor_id: turn.executorId,
    state: turn.state,
    epoch: turn.epoch,
    active: ACTIVE.has(turn.state),
  };
}

function snapshot(stored: StoredInteraction): PlatformInteraction {
  return {
    id: stored.id,
    interaction_id: stored.interactionId,
    session_id: stored.sessionId,
    turn_id: stored.turnId,
    executor_id: stored.executor.id,
    kind: stored.kind,
    ...(stored.toolUseId !== undefined ? { tool_use_id: stored.toolUseId } : {}),
    ...(stored.title !== undefined ? { title: stored.title } : {}),
    ...(stored.prompt !== undefined ? { prompt: stored.prompt } : {}),
    ...(stored.options !== undefined ? { options: stored.options } : {}),
    ...(stored.expiresAt !== undefined ? { expires_at: stored.expiresAt } : {}),
    status: stored.status,
    ...(stored.outcome !== undefined ? { outcome: stored.outcome } : {}),
    ...(stored.answer !== undefined ? { answer: stored.answer } : {}),
    ...(stored.message !== undefined ? { message: stored.message } : {}),
    ...(stored.cancelReason !== undefined ? { cancel_reason: stored.cancelReason } : {}),
    requests: stored.requests,
  };
}

function isoDate(value: string | Date | number): string {
  return (value instanceof Date ? value : new Date(value)).toISOString();
}
