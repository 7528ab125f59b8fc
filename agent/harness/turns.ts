/**
 * What the harness sends an executor about its agent sessions (`startTurn`, `sendTurnInput`,
 * `cancelTurn`, `closeAgentSession`, `sendCustomToolResult` on an executor handle), each sent
 * until the executor answers, with the platform's record of the turns kept in step: a turn is
 * pending once started (a repeat of one that ended is answered here, never run again), canceled
 * once a cancel is sent (unless the executor answers that the turn ended first), and the
 * session's close awaited.
 */
import { refuseOptions, wireSpellings } from "../../harness/option-spelling.ts";
import { ExecutorUnavailableError, SessionRefusedError } from "../../harness/errors.ts";
import type { CloseAgentSessionOptions, TurnInputRequest } from "../../harness/handle-options.ts";
import type { ExecutorHandle } from "../../harness/handles.ts";
import { keys } from "../../harness/records.ts";
import { storeUnavailable } from "../../harness/tool-call-ledger.ts";
import { hasCapability } from "../../protocol/capabilities.ts";
import { raceSignal } from "../../protocol/abort.ts";
import { CapabilityNotAdvertisedError } from "../../protocol/errors.ts";
import type {
  Ack,
  AgentCustomToolResultParams,
  CustomToolResultResult,
  SessionCloseResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnStartParams,
  TurnStartResult,
} from "../../protocol/generated/contract.ts";
import { randomId } from "../../protocol/ids.ts";
import type { CallOptions } from "../../protocol/peer.ts";
import { deliver } from "./delivery.ts";
import type { PlatformParts } from "./parts.ts";
import { ACTIVE, type TurnRecord } from "./records.ts";

/** `closeAgentSession`'s options in the wire's spelling. */
const CLOSE_OPTIONS = wireSpellings("timeout_ms");

/** The requests about turns and sessions the platform sends executors. */
export class PlatformTurns {
  readonly #parts: PlatformParts;

  constructor(parts: PlatformParts) {
    this.#parts = parts;
  }

  /**
   * `startTurn`: the turn is tracked (and stored) before the executor hears of it. Idempotent by
   * `turn_id`: a repeat of a turn that ended, or whose session did, answers `duplicate` without
   * being sent, so it never runs again (a restarted executor would not know it).
   */
  async start(
    executor: ExecutorHandle,
    params: TurnStartParams,
    options: CallOptions,
  ): Promise<TurnStartResult> {
    const known = this.#parts.sessions.get(params.session_id);
    const repeat = known?.turns.get(params.turn_id);
    if (known && repeat && (known.ended || !ACTIVE.has(repeat.state))) {
      return {
        turn_id: params.turn_id,
        accepted: true,
        ...(known.ref !== undefined ? { executor_session_ref: known.ref } : {}),
        duplicate: true,
      };
    }
    if (executor.gone) throw new ExecutorUnavailableError(executor.id, "gone");
    if (known?.closing && known.session && known.session.state !== "ended") {
      // The same id after session.close is a new conversation: it starts once the old one ended.
      await known.session.ended;
    }
    await this.#refuseRemembered(executor, params.session_id);
    const { record, created } = this.#parts.sessions.open(executor, params.session_id);
    // Turns of an earlier conversation under the id, which a refusal must not count as this one's.
    const inherited = created ? record.turns.size : 0;
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
    // A repeat of a turn still active is sent again; the current turn stays the latest started.
    if (newTurn) record.current = turn;
    // Kept before the executor hears of it: a harness started again grants its tokens.
    await this.#parts.store.keepSession(record);
    const refused = () => {
      if (newTurn) {
        record.turns.delete(params.turn_id);
        if (record.current === turn) record.current = previous;
      }
      if (created && record.turns.size === inherited && !record.ended) {
        this.#parts.ctx.attached.endSession(record.id, "refused");
      }
      this.#parts.store.keepSession(record);
    };
    let result: TurnStartResult;
    try {
      result = await deliver(this.#parts.ctx, executor, "turn.start", params, options);
    } catch (error) {
      refused();
      throw error;
    }
    if (result.accepted === false) {
      // The executor does not run it: never active, so no token is signed for it.
      refused();
      return result;
    }
    if (turn.state === "pending") turn.state = "running";
    if (result.executor_session_ref !== undefined) record.ref = result.executor_session_ref;
    this.#parts.store.keepSession(record);
    return result;
  }

  /**
   * Refuses a new conversation under the id of a session that ended and that the harness's store
   * still remembers (-> `SessionRefusedError` `session_exists`, as `assignSession` does): its
   * events stay readable, and a new harness session under the id would replace them, numbered
   * from 1 again. Resume the conversation under a new session id with `executor_session_ref`.
   */
  async #refuseRemembered(executor: ExecutorHandle, sessionId: string): Promise<void> {
    const host = this.#parts.ctx.attached;
    const store = host.store;
    if (!store) return; // Without a store the harness forgets a session once it ended.
    const held = () => {
      const known = this.#parts.sessions.get(sessionId);
      if (known?.session && known.session.state !== "ended") return true;
      const live = executor.sessions.get(sessionId);
      return live !== undefined && live.state !== "ended";
    };
    if (held()) return;
    let kept: unknown;
    try {
      kept = await store.get(keys.session(sessionId));
    } catch {
      throw storeUnavailable("session");
    }
    // Opened meanwhile by a concurrent turn.start: that one is this session.
    if (kept !== undefined && !held()) throw new SessionRefusedError(sessionId, "session_exists");
  }

  /** `sendTurnInput`: an input, with an id of its own when it has none. */
  input(
    executor: ExecutorHandle,
    params: TurnInputRequest,
    options: CallOptions,
  ): Promise<Ack> {
    return deliver(this.#parts.ctx, executor, "turn.input", {
      ...params,
      input_id: params.input_id ?? randomId("input_"),
    }, options);
  }

  /**
   * `cancelTurn`: the turn gets no more tokens from now on. When the executor answers
   * `canceled: false` (the turn ended first), the turn is as the executor reports it.
   */
  async cancel(
    executor: ExecutorHandle,
    params: TurnCancelParams,
    options: CallOptions,
  ): Promise<TurnCancelResult> {
    const record = this.#parts.sessions.get(params.session_id);
    let canceling: TurnRecord | undefined;
    if (record?.executorId === executor.id) {
      const turn = params.turn_id !== undefined ? record.turns.get(params.turn_id) : record.current;
      // Canceled from now on: no more tokens, even before the executor's idle event.
      if (turn && ACTIVE.has(turn.state)) {
        turn.canceling = turn.state;
        turn.state = "canceled";
        canceling = turn;
        this.#parts.store.keepSession(record);
      }
    }
    const result = await deliver(this.#parts.ctx, executor, "turn.cancel", params, options);
    // Unless the turn's idle event or its session's end said meanwhile how the turn ended:
    const before = canceling?.canceling;
    if (record && canceling && before !== undefined) {
      canceling.canceling = undefined;
      if (!result.canceled) {
        // Not canceled: the turn ended on its own, and its idle event says how.
        canceling.state = before;
        this.#parts.store.keepSession(record);
      }
    }
    return result;
  }

  /** `closeAgentSession`: resolves once the session has ended. */
  async close(
    executor: ExecutorHandle,
    sessionId: string,
    options: CloseAgentSessionOptions,
  ): Promise<SessionCloseResult> {
    refuseOptions("closeAgentSession", options, CLOSE_OPTIONS);
    const record = this.#parts.sessions.get(sessionId);
    const session = record?.executorId === executor.id && record.session
      ? record.session
      : executor.sessions.get(sessionId);
    if (record?.executorId === executor.id) {
      record.closing = true;
      for (const turn of record.turns.values()) {
        if (ACTIVE.has(turn.state)) turn.state = "canceled";
        turn.canceling = undefined; // The close cancels it, whatever a cancel in flight answers.
      }
      this.#parts.store.keepSession(record);
    }
    const signal = options.signal;
    const result = await deliver(this.#parts.ctx, executor, "session.close", {
      session_id: sessionId,
      ...(options.reason !== undefined ? { reason: options.reason } : {}),
    }, signal ? { signal } : {});
    if (!session || session.state === "ended") return result;
    const host = this.#parts.ctx.attached;
    if (!result.closed) {
      // The executor does not hold it: there is no session.ended to wait for.
      host.endSession(sessionId, options.reason ?? "closed");
      return result;
    }
    // Every wait ends: an executor that never sends session.ended does not hold the caller.
    host.awaitSessionEnd(sessionId, options.timeoutMs ?? 60_000, "close_timeout");
    await raceSignal(session.ended, signal, "session.close");
    return result;
  }

  /** `sendCustomToolResult`: the first result per call is sent; one for an ended turn is not. */
  async customToolResult(
    executor: ExecutorHandle,
    params: AgentCustomToolResultParams,
    options: CallOptions,
  ): Promise<CustomToolResultResult> {
    if (!hasCapability(executor.capabilities, "agent.custom_tools")) {
      throw new CapabilityNotAdvertisedError("agent.custom_tool_result", "agent.custom_tools");
    }
    const record = this.#parts.sessions.get(params.session_id);
    const mine = record?.executorId === executor.id ? record : undefined;
    // The platform takes one result per call; later ones are refused without a send.
    if (mine?.results.has(params.tool_use_id)) return { accepted: false };
    if (mine) {
      mine.results.add(params.tool_use_id);
      await this.#parts.store.keepSession(mine);
    }
    const ended = () => {
      const turnId = mine?.toolUses.get(params.tool_use_id);
      const turn = turnId !== undefined ? mine?.turns.get(turnId) : undefined;
      return turn !== undefined && !ACTIVE.has(turn.state);
    };
    // A result for a turn that ended is dropped: the executor no longer waits for it.
    if (ended()) return { accepted: false };
    return await deliver(
      this.#parts.ctx,
      executor,
      "agent.custom_tool_result",
      params,
      options,
      () => ended() ? { accepted: false } : undefined,
    );
  }
}
