/**
 * Local failures of the agent capability on the executor end: things decided on this side that
 * never crossed the wire. Wire errors stay the contract's generated classes (`TurnInactiveError`
 * -32007, `ForbiddenError` -32001, `CapabilityMissingError` -32012, `ConflictError` -32013, ...).
 *
 * No message here ever contains a token.
 */
import { LocalError } from "../../protocol/errors.ts";

/** `turn.customTool()` on an agent served without `customTools: true`; nothing was emitted. */
export class CustomToolsDisabledError extends LocalError {
  constructor() {
    super("custom tools are not enabled: serve the agent with { customTools: true }");
    this.name = "CustomToolsDisabledError";
  }
}

/**
 * The abort reason of a turn's `signal`: the harness canceled the turn (`turn.cancel`), closed
 * the session (`session.close`), or the session ended otherwise (`session.stop`, the client
 * stopped, the harness lost it). Waits of the turn (interactions, custom tools) reject with it.
 */
export class TurnCanceledError extends LocalError {
  /** The session. */
  readonly sessionId: string;
  /** The turn. */
  readonly turnId: string;
  /** Why: the `turn.cancel` reason, `session_closed`, or how the session ended. */
  readonly reason: string;
  /** Records which turn of which session was canceled, and why. */
  constructor(sessionId: string, turnId: string, reason: string) {
    super(`turn ${turnId} of session ${sessionId} canceled (${reason})`);
    this.name = "TurnCanceledError";
    this.sessionId = sessionId;
    this.turnId = turnId;
    this.reason = reason;
  }
}

/** The turn has ended (its `session.status_idle` is out): it emits and asks nothing more. */
export class TurnEndedError extends LocalError {
  /** The turn. */
  readonly turnId: string;
  /** Names the turn that has ended. */
  constructor(turnId: string) {
    super(`turn ${turnId} has ended`);
    this.name = "TurnEndedError";
    this.turnId = turnId;
  }
}

/**
 * An event id was emitted before in the session: the harness would take the repeat for a
 * duplicate and its sequence would leave a gap, so nothing was sent.
 */
export class DuplicateEventIdError extends LocalError {
  /** The event id. */
  readonly eventId: string;
  /** Names the event id that was emitted before. */
  constructor(eventId: string) {
    super(`event id ${JSON.stringify(eventId)} was already emitted in this session`);
    this.name = "DuplicateEventIdError";
    this.eventId = eventId;
  }
}

/**
 * `requestInteraction` with the `interaction_id` of an interaction still open in the session
 * but for another kind or `tool_use_id`: the harness would refuse it (-32013
 * `interaction_mismatch`), so it is refused here and nothing is sent.
 */
export class InteractionMismatchError extends LocalError {
  /** The interaction id. */
  readonly interactionId: string;
  /** Names the interaction id that is open for another kind or tool use. */
  constructor(interactionId: string) {
    super(`interaction ${JSON.stringify(interactionId)} is open for another kind or tool use`);
    this.name = "InteractionMismatchError";
    this.interactionId = interactionId;
  }
}

/**
 * The turn has no usable model (or tools) token: none came with `turn.start` or it has expired,
 * and the harness cannot issue one (it does not serve the refresh method, -32601).
 */
export class TokenUnavailableError extends LocalError {
  /** Which token. */
  readonly kind: "model" | "tools";
  /** Says which token is missing and why (never the token itself). */
  constructor(kind: "model" | "tools", why: string) {
    super(`no ${kind} token: ${why}`);
    this.name = "TokenUnavailableError";
    this.kind = kind;
  }
}

/**
 * Thrown by `runTurn` to fail the turn with a message meant for the platform: it becomes the
 * `session.error` event (`error.message`, `error.code`) before `session.status_idle` with
 * `turn_outcome: "failed"`. Any other exception fails the turn with a generic message, because
 * its text may name paths or values the platform must not see.
 */
export class AgentTurnError extends LocalError {
  /** Machine-readable code, snake_case. */
  readonly code: string;
  /** `message` and `code` go into the turn's `session.error` event; `cause` stays local. */
  constructor(message: string, code = "agent_failed", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AgentTurnError";
    this.code = code;
  }
}
