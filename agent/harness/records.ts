/**
 * What the agent platform holds in memory per session, turn and interaction (the records its
 * parts share), and the public views made of them ({@linkcode turnInfo}, {@linkcode snapshot}).
 */
import type { Session } from "../../harness/handles.ts";
import type { CallbackDeadline } from "../../harness/scheduler.ts";
import type { BoundedSet } from "../../protocol/bounded-set.ts";
import type {
  InteractionKind,
  InteractionOption,
  InteractionOutcome,
} from "../../protocol/generated/contract.ts";
import type {
  AgentTurnInfo,
  AgentTurnState,
  InteractionStatus,
  PlatformInteraction,
} from "./types.ts";

/** The states of an active turn: one that may still get tokens. */
export const ACTIVE: ReadonlySet<AgentTurnState> = new Set(["pending", "running"]);

/** A turn of a session. */
export interface TurnRecord {
  readonly sessionId: string;
  readonly turnId: string;
  readonly executorId: string;
  state: AgentTurnState;
  epoch: number;
  /**
   * A cancel was sent and the executor has not answered it: the state the turn had before
   * (`state` reads `canceled` meanwhile, so no token is signed for it).
   */
  canceling?: AgentTurnState | undefined;
}

/** An agent session, live or ended. */
export interface SessionRecord {
  readonly id: string;
  readonly executorId: string;
  /** The harness session while it is live (none for one read back after it ended). */
  readonly session: Session | undefined;
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
  /** The harness session ended. */
  ended: boolean;
}

/** A platform interaction. */
export interface StoredInteraction {
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
  /** The executor that asked last: answers go there. */
  executorId: string;
  /** The executor's registration epoch when it last asked. */
  executorEpoch: number;
  status: InteractionStatus;
  outcome: InteractionOutcome | undefined;
  answer: string | undefined;
  message: string | undefined;
  cancelReason: string | undefined;
  requests: number;
  /** The local deny at `expiresAt`. */
  expiry: CallbackDeadline | undefined;
  /** The "opened" change went out (after the request's answer). */
  announced: boolean;
  /**
   * The executor accepted the answer (`interaction.response`): an `interaction.cancel` of it
   * from then on is a repeat. Until then, one withdraws it, the answer not taken.
   */
  taken: boolean;
  /**
   * The platform withdrew it because its session ended (no executor holds the turn that
   * asked): a restarted executor's repeat of it opens it again.
   */
  withdrawn: boolean;
}

/** A turn as the platform reports it. */
export function turnInfo(turn: TurnRecord): AgentTurnInfo {
  return {
    session_id: turn.sessionId,
    turn_id: turn.turnId,
    executor_id: turn.executorId,
    state: turn.state,
    epoch: turn.epoch,
    active: ACTIVE.has(turn.state),
  };
}

/** An interaction as the platform reports it: a snapshot. */
export function snapshot(stored: StoredInteraction): PlatformInteraction {
  return {
    id: stored.id,
    interaction_id: stored.interactionId,
    session_id: stored.sessionId,
    turn_id: stored.turnId,
    executor_id: stored.executorId,
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
