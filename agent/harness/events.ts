/**
 * The agent events executors send the platform: each durable event (deduplicated and ordered
 * by the harness's event log) is stored by `onEvent`, moves its turn along (a turn's end, a
 * custom tool use and its result) and goes to the session's subscribers; deltas go to them as
 * previews.
 */
import type { ExecutorHandle } from "../../harness/handles.ts";
import type { SessionEventRecord } from "../../harness/records.ts";
import { isPromiseLike, type MaybePromise } from "../../harness/store/store.ts";
import type { AgentEvent, SessionEventDeltaParams } from "../../protocol/generated/contract.ts";
import type { PlatformParts } from "./parts.ts";
import { ACTIVE } from "./records.ts";

/** The events and deltas of every agent session. */
export class PlatformEvents {
  readonly #parts: PlatformParts;

  constructor(parts: PlatformParts) {
    this.#parts = parts;
  }

  /**
   * A durable event the harness accepted: stored by `onEvent` first, then applied (a turn's end,
   * a custom tool use) and published.
   */
  accept(record: SessionEventRecord): MaybePromise<void> {
    const onEvent = this.#parts.ctx.options.onEvent;
    if (!onEvent) return this.#apply(record);
    const stored = onEvent(record);
    return isPromiseLike(stored)
      ? Promise.resolve(stored).then(() => this.#apply(record))
      : this.#apply(record);
  }

  #apply(record: SessionEventRecord): MaybePromise<void> {
    const session = this.#parts.sessions.get(record.session_id);
    const eventId = record.event_id!;
    let kept: MaybePromise<void> = undefined;
    if (session) {
      const event = record.event as unknown as AgentEvent;
      const turn = record.turn_id !== undefined ? session.turns.get(record.turn_id) : undefined;
      let changed = false;
      // The executor's word on how the turn ended, also over a cancel it has not answered yet.
      if (
        event.type === "session.status_idle" && turn &&
        (ACTIVE.has(turn.state) || turn.canceling !== undefined)
      ) {
        turn.state = event.turn_outcome;
        turn.canceling = undefined;
        changed = true;
      }
      if (event.type === "agent.custom_tool_use" && record.turn_id !== undefined) {
        session.toolUses.set(eventId, record.turn_id);
        changed = true;
      }
      if (event.type === "agent.tool_result" && session.toolUses.delete(event.tool_use_id)) {
        changed = true;
      }
      session.finalized.add(eventId);
      session.started.delete(eventId);
      // Kept before the event's ACK: a harness started again knows how the turn ended.
      if (changed) kept = this.#parts.store.keepSession(session);
    }
    const publish = () =>
      this.#parts.streams.publish(record.session_id, { type: "event", record }, false);
    if (isPromiseLike(kept)) return Promise.resolve(kept).then(publish);
    publish();
  }

  /** A delta: relayed to the session's subscribers as a preview (lossy). */
  delta(executor: ExecutorHandle, params: SessionEventDeltaParams): void {
    const record = this.#parts.sessions.get(params.session_id);
    // Lossy: a preview of a session elsewhere, or of an event already final, is dropped.
    if (!record || record.executorId !== executor.id || record.finalized.has(params.event_id)) {
      return;
    }
    const base = {
      session_id: params.session_id,
      turn_id: params.turn_id,
      event_id: params.event_id,
    };
    if (!record.started.has(params.event_id)) {
      record.started.add(params.event_id);
      this.#parts.streams.publish(params.session_id, { type: "event_start", ...base }, true);
    }
    this.#parts.streams.publish(params.session_id, {
      type: "event_delta",
      ...base,
      ...(params.index !== undefined ? { index: params.index } : {}),
      delta: params.delta,
    }, true);
  }
}
