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
 *   id gets an `int_…` id; answers are delivered until the executor answers; the open ones of a
 *   session that ends are withdrawn (`session_ended`);
 * - **streams**: durable agent events (deduplicated and ordered by the harness's event log)
 *   and their deltas, relayed to subscribers as `event_start` / `event_delta` / `event`.
 *
 * It plugs into the harness through the harness's agent seam (`AgentExtension`): the harness
 * calls `attach` once and serves the capability's methods with the hooks it returns. What must
 * survive a restart of the harness — turns and their states, interactions and their answers —
 * is kept in the harness's store (`a/s/<session_id>`, `a/i/<platform_id>`), written before the
 * harness acknowledges it.
 *
 * This module is the platform's face; its parts, beside it in `agent/harness/`: the sessions and
 * their routing (`sessions.ts`), what is sent to executors about turns (`turns.ts`), the events
 * and the streams they feed (`events.ts`, `streams.ts`), the interactions (`interactions.ts`),
 * the tokens (`tokens.ts`), the requests sent until answered (`delivery.ts`) and the store
 * (`store.ts`).
 *
 * Portable: web-standard APIs only.
 */
import type {
  AgentExtension,
  AgentExtensionHooks,
  AgentExtensionHost,
  AgentOps,
} from "../../harness/extension.ts";
import { LocalError } from "../../protocol/errors.ts";
import type { Disposable } from "../../protocol/peer.ts";
import { PlatformContext } from "./context.ts";
import { PlatformEvents } from "./events.ts";
import { PlatformInteractions } from "./interactions.ts";
import type { PlatformParts } from "./parts.ts";
import { turnInfo } from "./records.ts";
import { PlatformSessions } from "./sessions.ts";
import { PlatformStore } from "./store.ts";
import { AgentStreams } from "./streams.ts";
import { PlatformTokens } from "./tokens.ts";
import { PlatformTurns } from "./turns.ts";
import type {
  AgentPlatformOptions,
  AgentStreamEvent,
  AgentTurnInfo,
  InteractionChange,
  PlatformAnswer,
  PlatformInteraction,
  StreamOptions,
  WaitInteractionOptions,
} from "./types.ts";

export { AgentPlatformDetachedError } from "./errors.ts";
export type {
  AgentPlatformOptions,
  AgentStreamEvent,
  AgentTurnInfo,
  AgentTurnState,
  InteractionChange,
  InteractionStatus,
  ModelTokenGrant,
  PlatformAnswer,
  PlatformInteraction,
  StreamOptions,
  ToolsTokenGrant,
  WaitInteractionOptions,
} from "./types.ts";

/** The harness end of the agent capability. */
export class AgentPlatform implements AgentExtension {
  readonly #parts: PlatformParts;
  readonly #turns: PlatformTurns;
  readonly #events: PlatformEvents;
  readonly #interactions: PlatformInteractions;
  readonly #tokens: PlatformTokens;

  /** A platform with nothing attached yet: pass it to `new Harness({ agent })`. */
  constructor(options: AgentPlatformOptions = {}) {
    const ctx = new PlatformContext(options);
    const store = new PlatformStore(ctx);
    const streams = new AgentStreams(options);
    const sessions = new PlatformSessions(ctx, store, streams);
    const parts = this.#parts = { ctx, store, streams, sessions };
    this.#turns = new PlatformTurns(parts);
    this.#events = new PlatformEvents(parts);
    this.#interactions = new PlatformInteractions(parts);
    this.#tokens = new PlatformTokens(parts);
  }

  /**
   * The harness's agent seam: called once by the `Harness` the platform is given to
   * (`new Harness({ agent: platform })`), which then serves the agent capability's methods
   * with the hooks returned. A platform serves one harness.
   */
  attach(host: AgentExtensionHost): AgentExtensionHooks {
    if (this.#parts.ctx.host) throw new LocalError("an AgentPlatform serves one Harness");
    this.#parts.ctx.host = host;
    const turns = this.#turns;
    const interactions = this.#interactions;
    const ops: AgentOps = {
      startTurn: (executor, params, options) => turns.start(executor, params, options),
      sendTurnInput: (executor, params, options) => turns.input(executor, params, options),
      cancelTurn: (executor, params, options) => turns.cancel(executor, params, options),
      closeAgentSession: (executor, id, options) => turns.close(executor, id, options),
      respondInteraction: (executor, params, options) =>
        interactions.sendResponse(executor, params, options),
      sendCustomToolResult: (executor, params, options) =>
        turns.customToolResult(executor, params, options),
    };
    return {
      ...ops,
      acceptEvent: (record) => this.#events.accept(record),
      delta: (executor, params) => this.#events.delta(executor, params),
      requestInteraction: (executor, params, reply) =>
        interactions.request(executor, params, reply),
      cancelInteraction: (executor, params) => interactions.cancel(executor, params),
      modelToken: (executor, params) => this.#tokens.model(executor, params),
      toolsToken: (executor, params) => this.#tokens.tools(executor, params),
      recover: () =>
        this.#parts.store.recover((sessions, stored) => {
          this.#parts.sessions.adopt(sessions);
          interactions.adopt(stored);
        }),
    };
  }

  // ---- public API -----------------------------------------------------------------------------

  /**
   * Subscribes to a session's agent stream from now on: `event_start` and `event_delta` for
   * previews (lossy), and each durable event once, in sequence order (`event`). Ends when the
   * session ends, `signal` aborts, or the reader stops early.
   */
  stream(sessionId: string, options: StreamOptions = {}): AsyncIterableIterator<AgentStreamEvent> {
    return this.#parts.streams.stream(sessionId, options);
  }

  /** Every interaction the platform holds (snapshots), oldest first. */
  get interactions(): PlatformInteraction[] {
    return this.#interactions.all();
  }

  /** An interaction by its platform id. */
  interaction(id: string): PlatformInteraction | undefined {
    return this.#interactions.get(id);
  }

  /** Calls `listener` on every interaction change. */
  onInteraction(listener: (change: InteractionChange) => void): Disposable {
    return this.#interactions.onInteraction(listener);
  }

  /** Resolves with an open interaction matching `filter`: one held now, else the next opened. */
  waitInteraction(options: WaitInteractionOptions = {}): Promise<PlatformInteraction> {
    return this.#interactions.wait(options);
  }

  /**
   * Answers an open interaction: the first answer wins (false for a settled or unknown one, one
   * withdrawn because its session ended, and while an answer sent with
   * `executor.respondInteraction` waits for the executor's word).
   * The answer is kept in the harness's store, then goes to the executor that asked last
   * (`interaction.response`), resent until it answers; after an executor restart, its repeat of
   * an `appr_…` request gets it too, as after a restart of the harness.
   */
  respond(id: string, answer: PlatformAnswer): boolean {
    return this.#interactions.respond(id, answer);
  }

  /** The session's current (latest started) turn; a repeated `turn.start` does not move it. */
  turn(sessionId: string): AgentTurnInfo | undefined {
    const turn = this.#parts.sessions.get(sessionId)?.current;
    return turn ? turnInfo(turn) : undefined;
  }

  /**
   * A turn of a session by id (of an ended one too, while the platform remembers it, and of an
   * earlier conversation under the same id).
   */
  turnById(sessionId: string, turnId: string): AgentTurnInfo | undefined {
    const turn = this.#parts.sessions.get(sessionId)?.turns.get(turnId);
    return turn ? turnInfo(turn) : undefined;
  }

  /** The latest `executor_session_ref` the session's executor returned (send it back on resume). */
  executorSessionRef(sessionId: string): string | undefined {
    return this.#parts.sessions.get(sessionId)?.ref;
  }
}
