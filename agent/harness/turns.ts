/**
 * What the harness sends an executor about its agent sessions (`startTurn`, `sendTurnInput`,
 * `cancelTurn`, `closeAgentSession`, `sendCustomToolResult` on an executor handle), each sent
 * until the executor answers, with the platform's record of the turns kept in step: a turn is
 * pending once started, canceled once a cancel is sent, and the session's close awaited.
 */
import { ExecutorUnavailableError } from "../../harness/errors.ts";
import type { CloseAgentSessionOptions, TurnInputRequest } from "../../harness/handle-options.ts";
import type { ExecutorHandle } from "../../harness/handles.ts";
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
import { ACTIVE } from "./records.ts";

/** The requests about turns and sessions the platform sends executors. */
export class PlatformTurns {
  readonly #parts: PlatformParts;

  constructor(parts: PlatformParts) {
    this.#parts = parts;
  }

  /** `startTurn`: the turn is tracked (and stored) before the executor hears of it. */
  async start(
    executor: ExecutorHandle,
    params: TurnStartParams,
    options: CallOptions,
  ): Promise<TurnStartResult> {
    if (executor.gone) throw new ExecutorUnavailableError(executor.id, "gone");
    const closing = this.#parts.sessions.get(params.session_id);
    if (closing?.closing && closing.session && closing.session.state !== "ended") {
      // The same id after session.close is a new conversation: it starts once the old one ended.
      await closing.session.ended;
    }
    const { record, created } = this.#parts.sessions.open(executor, params.session_id);
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
    // Kept before the executor hears of it: a harness started again grants its tokens.
    await this.#parts.store.keepSession(record);
    const refused = () => {
      if (newTurn) {
        record.turns.delete(params.turn_id);
        if (record.current === turn) record.current = previous;
      }
      if (created && record.turns.size === 0 && !record.ended) {
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

  /** `cancelTurn`: the turn gets no more tokens from now on. */
  cancel(
    executor: ExecutorHandle,
    params: TurnCancelParams,
    options: CallOptions,
  ): Promise<TurnCancelResult> {
    const record = this.#parts.sessions.get(params.session_id);
    if (record?.executorId === executor.id) {
      const turn = params.turn_id !== undefined ? record.turns.get(params.turn_id) : record.current;
      // Canceled from now on: no more tokens, even before the executor's idle event.
      if (turn && ACTIVE.has(turn.state)) {
        turn.state = "canceled";
        this.#parts.store.keepSession(record);
      }
    }
    return deliver(this.#parts.ctx, executor, "turn.cancel", params, options);
  }

  /** `closeAgentSession`: resolves once the session has ended. */
  async close(
    executor: ExecutorHandle,
    sessionId: string,
    options: CloseAgentSessionOptions,
  ): Promise<SessionCloseResult> {
    const record = this.#parts.sessions.get(sessionId);
    const session = record?.executorId === executor.id && record.session
      ? record.session
      : executor.sessions.get(sessionId);
    if (record?.executorId === executor.id) {
      record.closing = true;
      for (const turn of record.turns.values()) {
        if (ACTIVE.has(turn.state)) turn.state = "canceled";
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
