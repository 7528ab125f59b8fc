/**
 * The executor side's public vocabulary: what `runTurn` gets ({@linkcode Turn}) and what the
 * handler of `serveAgent` implements ({@linkcode AgentHandler}).
 */
import type {
  AgentEvent,
  ContentBlock,
  EventDelta,
  InteractionKind,
  InteractionOption,
  InteractionOutcome,
  TurnMetadata,
} from "../../protocol/generated/contract.ts";
import type { TraceContext } from "../../protocol/trace-context.ts";

/** One `turn.input` delivered to the running turn. */
export interface TurnInput {
  /** The harness's idempotency key. */
  readonly input_id: string;
  /** The added input. */
  readonly input: ContentBlock[];
}

/** Options of {@linkcode Turn.emit}. */
export interface EmitOptions {
  /**
   * The event's id, e.g. one taken from {@linkcode Turn.eventId} earlier to stream deltas of it.
   * Default: a fresh id. An id already emitted in the session is refused locally.
   */
  eventId?: string;
  /**
   * Stops waiting for the acknowledgement (rejects with `RequestAbortedError`): the event is
   * delivered all the same. An already-aborted signal emits nothing.
   */
  signal?: AbortSignal;
}

/** A durable event the harness acknowledged. */
export interface EmittedEvent {
  /** The event's id (a tool use's `tool_use_id`). */
  readonly event_id: string;
  /** Its per-session sequence (1, 2, 3, ...). */
  readonly sequence: number;
  /** The harness's highest accepted sequence when it answered. */
  readonly acked_sequence?: number;
  /** The harness already had it (a resend after a reconnect). */
  readonly duplicate?: boolean;
}

/** What {@linkcode Turn.requestInteraction} asks the platform. */
export interface InteractionRequest {
  /** `permission` (approve a tool use) or `question`. */
  kind: InteractionKind;
  /**
   * The idempotency key. An `appr_` + 24 lower-case hex id (see `approvalId`) is adopted by the
   * platform as its own id, also after an executor restart; any other id is this executor's key
   * only. Default: a fresh random id.
   */
  interaction_id?: string;
  /** `permission`: the `event_id` of the `agent.tool_use` (emitted with `evaluated_permission: "ask"`). */
  tool_use_id?: string;
  /** Short title. */
  title?: string;
  /** The question, or what needs approval. */
  prompt?: string;
  /** Choices offered; the answer names one by id. */
  options?: InteractionOption[];
  /** After this the executor denies on its own (outcome `expired`) and withdraws the request. */
  expires_at?: string | Date;
}

/** How an interaction ended. */
export interface InteractionAnswer {
  /** The executor's interaction id. */
  readonly interaction_id: string;
  /** The platform's id for it, once the platform answered the request. */
  readonly platform_interaction_id?: string;
  /** `approved`, `denied`, `answered`, `expired` or `canceled`. */
  readonly outcome: InteractionOutcome;
  /** The chosen option id, or free text. */
  readonly answer?: string;
  /** An optional note from the user (e.g. why denied). */
  readonly message?: string;
  /** Decided on this side: `expires_at` passed, or {@linkcode Turn.resolveInteraction}. */
  readonly local: boolean;
}

/** A local answer for {@linkcode Turn.resolveInteraction}. */
export interface LocalAnswer {
  /** `approved`, `denied`, `answered`, `expired` or `canceled`. */
  outcome: InteractionOutcome;
  /** The chosen option id, or free text. */
  answer?: string;
  /** An optional note (e.g. why denied). */
  message?: string;
}

/** Options of {@linkcode Turn.customTool}. */
export interface CustomToolOptions {
  /** How long to wait for the result. Default: the `customToolTimeoutMs` of `serveAgent`. */
  timeoutMs?: number;
  /** The `agent.custom_tool_use` event's id (the `tool_use_id`). Default: a fresh id. */
  eventId?: string;
  /**
   * Stops waiting for the result (rejects with `RequestAbortedError`); the call still ends by
   * its result or its timeout. An already-aborted signal calls nothing.
   */
  signal?: AbortSignal;
}

/** How a custom tool call ended. */
export interface CustomToolOutcome {
  /** The call's id (the `event_id` of its `agent.custom_tool_use`). */
  readonly tool_use_id: string;
  /** The result content (on a timeout: the text the failed `agent.tool_result` carried). */
  readonly content: ContentBlock[];
  /** The user's application reported an error, or the wait timed out. */
  readonly is_error: boolean;
  /** No result came in time: the call was ended with a failed `agent.tool_result`. */
  readonly timed_out: boolean;
}

/** A model credential of a turn. Secret: memory only, never logged. */
export interface ModelCredential {
  /** The token (a secret: never logged). */
  readonly token: string;
  /** Expiry, ms since the epoch. */
  readonly expiresAt: number;
  /** The base URL to join with the token, when known. */
  readonly baseUrl?: string;
}

/** A platform tools credential of a turn. Secret: memory only, never logged. */
export interface ToolsCredential {
  /** The token (a secret: never logged). */
  readonly token: string;
  /** Expiry, ms since the epoch. */
  readonly expiresAt: number;
  /** The tools MCP URL to use it with, when known. */
  readonly url?: string;
}

/** One turn of an agent session, as `openTurn` and `runTurn` see it. */
export interface Turn {
  /** The session. */
  readonly sessionId: string;
  /** The turn. */
  readonly turnId: string;
  /** The user input that started it. */
  readonly input: readonly ContentBlock[];
  /** The `turn.start` metadata without its tokens (use {@linkcode modelToken} / {@linkcode toolsToken}). */
  readonly metadata: Readonly<TurnMetadata>;
  /** The `executor_session_ref` the harness sent back: resume the local conversation from it. */
  readonly executorSessionRef: string | undefined;
  /**
   * The turn's W3C trace context: the one `turn.start` carried (`params._meta`), or with the
   * client's `telemetry` the context of the turn's server span (a child of that one).
   */
  readonly trace: TraceContext | undefined;
  /** This turn opened the local conversation (the first turn, or the first after a restart). */
  readonly first: boolean;
  /** Aborted on `turn.cancel` and when the session closes or ends; the reason is a `TurnCanceledError`. */
  readonly signal: AbortSignal;
  /** The `turn.input`s of the turn as they arrive (each once); ends when the turn ends. */
  readonly inputs: AsyncIterable<TurnInput>;
  /** Takes the inputs that arrived and were not read yet, without waiting ("at the next step"). */
  takeInputs(): TurnInput[];
  /** A fresh event id, to stream deltas of an event before emitting it. */
  eventId(): string;
  /**
   * Emits a durable event: `event_id` and the next `sequence` are assigned now, the event is
   * kept until the harness acknowledges it and resent in order after a reconnect. Resolves with
   * the acknowledgement. Rejects with `TurnEndedError` after the turn ended,
   * `InvalidOutgoingParamsError` for an event that is not an `AgentEvent` (or a
   * `session.status_*` event, which the turn emits itself), `DuplicateEventIdError`, or
   * `FrameTooLargeError`; nothing is sent then. Not awaiting it is safe: the event is still
   * delivered.
   *
   * An event found too large only after it was numbered (the harness closed the connection over
   * its frame with 1009, and the client now sends smaller frames) also rejects with
   * `FrameTooLargeError`: a `session.error` event (`error.code` `event_too_large`) is delivered
   * in its place, under its `event_id` and `sequence`, so the session's later events still pass.
   */
  emit(event: AgentEvent, options?: EmitOptions): Promise<EmittedEvent>;
  /**
   * Streams a transient preview of the durable event `eventId` (`session.event_delta`): lossy,
   * never resent; dropped while disconnected and once the event itself was emitted.
   */
  delta(eventId: string, delta: EventDelta): void;
  /**
   * Asks the platform (`interaction.request`, resent until the harness answers) and resolves
   * with the answer (`interaction.response`). Idempotent by `interaction_id` within the session:
   * a repeat while it is open joins it (the same id for another kind or `tool_use_id` rejects
   * with `InteractionMismatchError`).
   * Rejects with the turn's `TurnCanceledError` when the turn is canceled (the request is
   * withdrawn with `turn_canceled`), with `RequestAbortedError` when `signal` aborts (the request
   * is withdrawn, its `cause` the signal's reason), or with the harness's refusal
   * (`ConflictError` -32013, `ForbiddenError`, `TurnInactiveError`).
   */
  requestInteraction(
    request: InteractionRequest,
    options?: { signal?: AbortSignal },
  ): Promise<InteractionAnswer>;
  /**
   * Settles an open interaction on this side (the user answered locally; the executor keeps
   * local authority) and withdraws it from the platform (`resolved_locally`). False when no
   * such interaction is open.
   */
  resolveInteraction(interactionId: string, answer: LocalAnswer): boolean;
  /**
   * Calls a custom tool of the user's application: emits `agent.custom_tool_use` and waits for
   * `agent.custom_tool_result`. When no result comes within the timeout the call ends with a
   * failed `agent.tool_result` (`is_error: true`) and this resolves with `timed_out: true`; a
   * later result is refused. Rejects with the turn's `TurnCanceledError` on cancel, and with
   * `CustomToolsDisabledError` unless the agent is served with `customTools: true`.
   */
  customTool(
    name: string,
    input: Record<string, unknown>,
    options?: CustomToolOptions,
  ): Promise<CustomToolOutcome>;
  /**
   * The turn's model credential, refreshed (`model_token.refresh`) when less than the lead
   * (default 10 minutes) remains. A harness without the method (-32601) leaves the current
   * token in use; without any valid token that is `TokenUnavailableError`. The harness's
   * refusals come as its typed errors: `TurnInactiveError` (-32007), `ForbiddenError` (-32001),
   * `CapabilityMissingError` (-32012, `model_token_unavailable`). `options.signal` stops
   * waiting for a refresh (rejects with `RequestAbortedError`).
   */
  modelToken(options?: { signal?: AbortSignal }): Promise<ModelCredential>;
  /** The turn's platform tools credential, like {@linkcode modelToken} (`tools_token.refresh`). */
  toolsToken(options?: { signal?: AbortSignal }): Promise<ToolsCredential>;
}

/** What `openTurn` may return. */
export interface OpenTurnResult {
  /**
   * An opaque reference to the local conversation, returned to the harness in
   * `TurnStartResult.executor_session_ref` and sent back on later `turn.start`s so the
   * conversation can be resumed after a restart.
   */
  executorSessionRef?: string;
}

/** What `runTurn` may return. */
export interface TurnEnd {
  /** Default `completed`. A canceled turn is always `canceled`; a thrown error is `failed`. */
  outcome?: "completed" | "failed" | "max_turns";
  /** Free-form model stop reason. Default `end_turn`. */
  stop_reason?: string;
}

/** Your agent loop, served by `serveAgent`. */
export interface AgentHandler {
  /**
   * Opens (or, from `turn.executorSessionRef`, resumes) the local conversation before its first
   * turn runs; `turn.start` is answered once it returns, and refused with its error if it
   * throws (a `ProtocolError` keeps its code).
   */
  openTurn?(turn: Turn): void | OpenTurnResult | Promise<void | OpenTurnResult>;
  /**
   * Runs one turn. The turn is framed by `session.status_running` and `session.status_idle`
   * (with `turn_outcome`), which are emitted for you. Stop when `turn.signal` aborts.
   */
  runTurn(turn: Turn): void | TurnEnd | Promise<void | TurnEnd>;
  /** Releases the local conversation: after `session.close`, or when the session ends otherwise. */
  closeSession?(sessionId: string, info: { reason: string }): void | Promise<void>;
}
