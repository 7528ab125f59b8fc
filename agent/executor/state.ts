/**
 * What the agent capability holds per session and per turn on the executor end: a session's
 * state (its sequence, its turn ids, its pending interactions and custom tool waits), the run of
 * one turn ({@linkcode TurnRun}: its signal, inputs, tokens), and the few helpers every part of
 * the service shares.
 */
import type { ExecutorSession } from "../../executor/sessions.ts";
import { type Deferred, deferred } from "../../executor/timing.ts";
import type { TimerHandle } from "../../protocol/clock.ts";
import type {
  TurnMetadata,
  TurnStartParams,
  TurnStartResult,
} from "../../protocol/generated/contract.ts";
import type { BoundedSet, RecentIds } from "../../protocol/bounded-set.ts";
import type { TracedSpan } from "../../protocol/telemetry.ts";
import type { TraceContext } from "../../protocol/trace-context.ts";
import { TurnCanceledError } from "./errors.ts";
import { AsyncQueue } from "../queue.ts";
import type {
  CustomToolOutcome,
  InteractionAnswer,
  InteractionRequest,
  Turn,
  TurnInput,
} from "./types.ts";

/** A token from `turn.start` without an expiry counts as valid this long (the platform's 1 hour). */
export const ASSUMED_TOKEN_LIFETIME_MS = 60 * 60_000;

/** Where a turn is on the executor. */
export type RunState = "opening" | "running" | "ending" | "ended";

/** A model or tools token of a turn, and its refresh under way. */
export interface TokenCache {
  token: string | undefined;
  expiresAt: number;
  url: string | undefined;
  /** The harness answered -32601: keep the current token, do not ask again. */
  methodMissing: boolean;
  inflight: Promise<TokenView> | undefined;
}

/** A token as a turn reads it. */
export interface TokenView {
  token: string;
  expiresAt: number;
  url?: string;
}

/** An interaction the turn asked for, until it is answered, expires or is withdrawn. */
export interface PendingInteraction {
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
  /**
   * The platform's answer, accepted (`accepted: true` is on its way) and not yet applied: a turn
   * ended meanwhile still gets it, as the brain was told.
   */
  accepted: Omit<InteractionAnswer, "interaction_id" | "platform_interaction_id"> | undefined;
  platformId: string | undefined;
  timer: TimerHandle | undefined;
}

/** A custom tool call waiting for its result. */
export interface CustomWait {
  readonly run: TurnRun;
  readonly done: Deferred<CustomToolOutcome>;
  timer: TimerHandle | undefined;
}

/** An agent session held by the executor. */
export interface SessionState {
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

/** One turn: its params, signal, inputs and tokens, and where it is. */
export class TurnRun {
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
  turn!: Turn;
  /** The turn's trace context (see `Turn.trace`). */
  trace: TraceContext | undefined = undefined;
  /** The turn's server span (`turn.start`, to the turn's end), with telemetry. */
  span: TracedSpan | undefined = undefined;

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

/** A token as `turn.start` brought it; without an expiry it counts as valid for an hour. */
export function tokenCache(
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

/** A rejected promise no one has to handle: the caller may drop it. */
export function rejected<T>(error: unknown): Promise<T> {
  const promise = Promise.reject(error);
  promise.catch(() => {});
  return promise;
}

/** Cancels a turn once: its signal aborts with a {@linkcode TurnCanceledError} saying why. */
export function cancelRun(state: SessionState, run: TurnRun, reason: string): void {
  if (run.controller.signal.aborted) return;
  run.controller.abort(new TurnCanceledError(state.id, run.turnId, reason));
}
