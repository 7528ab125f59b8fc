/**
 * The public types of the agent capability on the harness end: what the
 * {@linkcode AgentPlatform} reports of turns and interactions, what its token issuers return,
 * what a stream's subscriber receives, and the platform's options.
 */
import type { SessionEventRecord } from "../../harness/records.ts";
import type {
  EventDelta,
  InteractionKind,
  InteractionOption,
  InteractionOutcome,
  TurnOutcome,
} from "../../protocol/generated/contract.ts";
import type { BackoffPolicy } from "../../protocol/retry.ts";

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
  /**
   * Why it was withdrawn: the executor's reason (`interaction.cancel`), or `session_ended` when
   * the platform withdrew it because its session ended (lost, lease expired, closed, stopped).
   */
  readonly cancel_reason?: string;
  /** How many `interaction.request`s named it (repeats, restarts). */
  readonly requests: number;
}

/** A change of a platform interaction. */
export interface InteractionChange {
  /**
   * `opened`: a new interaction (show it); `repeated`: a repeat named it again (e.g. after an
   * executor restart; still one interaction, open again when it had been withdrawn because its
   * session ended); `settled`: answered or expired; `canceled`: withdrawn, by the executor or
   * because its session ended (dismiss it).
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
