/**
 * The events of the agent capability's turns on the executor end: durable events numbered per
 * session and sent through the client's event outbox (kept until acknowledged, resent in order
 * after a reconnect), and their deltas as lossy notifications.
 */
import { ClientStoppedError } from "../../executor/errors.ts";
import { describeError } from "../../executor/timing.ts";
import { FrameTooLargeError, InvalidOutgoingParamsError } from "../../protocol/errors.ts";
import {
  type AgentEvent,
  AgentEventSchema,
  type EventDelta,
  isAgentEvent,
  type SessionEventParams,
} from "../../protocol/generated/contract.ts";
import { ConflictError, NotFoundError } from "../../protocol/generated/errors.ts";
import { randomId } from "../../protocol/ids.ts";
import { DEFAULT_MAX_DEPTH, exceedsDepth, utf8Length } from "../../protocol/jsonrpc.ts";
import type { ServiceContext } from "./context.ts";
import { DuplicateEventIdError, TurnEndedError } from "./errors.ts";
import { cancelRun, rejected, type SessionState, type TurnRun } from "./state.ts";
import type { EmitOptions, EmittedEvent } from "./types.ts";

/** Room for the envelope around a `session.event`'s params when checking the frame size. */
const ENVELOPE_BYTES = 256;

/** Emitted by the turn itself, never by the handler. */
const RESERVED_TYPES: ReadonlySet<string> = new Set([
  "session.status_running",
  "session.status_idle",
]);

/** The events and deltas of every turn the service runs. */
export class TurnEvents {
  readonly #ctx: ServiceContext;

  constructor(ctx: ServiceContext) {
    this.#ctx = ctx;
  }

  /**
   * Sends an event a turn emits: checked against the contract (the turn's status events are its
   * own), then numbered and kept until the harness acknowledges it.
   */
  emit(
    state: SessionState,
    run: TurnRun,
    event: AgentEvent,
    options: EmitOptions,
  ): Promise<EmittedEvent> {
    if (run.finished) return rejected(new TurnEndedError(run.turnId));
    const type = (event as { type?: unknown } | undefined)?.type;
    if (typeof type === "string" && RESERVED_TYPES.has(type)) {
      return rejected(
        new InvalidOutgoingParamsError("session.event", [{
          path: ["event", "type"],
          message: `${type} is emitted by the turn itself`,
          code: "custom",
        }]),
      );
    }
    const checked = isAgentEvent(event) ? undefined : AgentEventSchema.safeParse(event);
    if (checked && !checked.success) {
      return rejected(
        new InvalidOutgoingParamsError(
          "session.event",
          checked.error.issues.map((i) => ({
            path: ["event", ...i.path.map(String)],
            message: i.message,
            code: i.code,
          })),
        ),
      );
    }
    return this.write(state, run, event, options, false);
  }

  /**
   * Sends an event as it is, unchecked: the turn's own (its status, its failure, a custom tool's
   * timeout) are `internal`, which only changes how a failed delivery is logged.
   */
  write(
    state: SessionState,
    run: TurnRun,
    event: AgentEvent,
    options: EmitOptions,
    internal: boolean,
  ): Promise<EmittedEvent> {
    const eventId = options.eventId ?? randomId("evt_");
    if (state.eventIds.has(eventId)) return rejected(new DuplicateEventIdError(eventId));
    const sequence = state.sequence + 1;
    const params: SessionEventParams = {
      session_id: state.id,
      event: event as unknown as SessionEventParams["event"],
      turn_id: run.turnId,
      event_id: eventId,
      sequence,
    };
    const text = JSON.stringify(params);
    const bytes = utf8Length(text) + ENVELOPE_BYTES;
    const limit = this.#ctx.host.maxFrameBytes;
    // Sent, either would be refused for good and leave a gap no later event could pass.
    if (bytes > limit) return rejected(new FrameTooLargeError(bytes, limit));
    // The params are level 2 of the frame; a receiver refuses it past DEFAULT_MAX_DEPTH.
    if (exceedsDepth(text, DEFAULT_MAX_DEPTH - 1)) {
      return rejected(
        new InvalidOutgoingParamsError("session.event", [{
          path: ["event"],
          message: `nested deeper than ${DEFAULT_MAX_DEPTH} levels in its frame`,
          code: "too_deep",
        }]),
      );
    }
    state.sequence = sequence;
    state.eventIds.add(eventId);
    run.deltaIndex.delete(eventId);
    const sent = this.#ctx.client.call("session.event", params).then((ack): EmittedEvent => ({
      event_id: eventId,
      sequence,
      ...(ack.acked_sequence !== undefined ? { acked_sequence: ack.acked_sequence } : {}),
      ...(ack.duplicate ? { duplicate: true } : {}),
    }));
    state.pending.add(sent);
    sent.then(
      () => state.pending.delete(sent),
      (error) => {
        state.pending.delete(sent);
        if (error instanceof NotFoundError && state.run === run) {
          // The harness no longer knows the session: the turn cannot go on.
          cancelRun(state, run, "session_lost");
        } else if (error instanceof ConflictError && state.run === run) {
          // A gap the harness will not pass (an event before this one was refused for good):
          // no later event of the session would be taken.
          cancelRun(state, run, "events_refused");
        }
        if (!(error instanceof ClientStoppedError)) {
          this.#ctx.logger.warn("agent event not delivered", {
            session_id: state.id,
            sequence,
            internal,
            error: describeError(error),
          });
        }
      },
    );
    return sent;
  }

  /** Sends a preview fragment of an event still to come: lossy, never resent. */
  delta(state: SessionState, run: TurnRun, eventId: string, delta: EventDelta): void {
    if (run.finished || state.eventIds.has(eventId)) return;
    const index = run.deltaIndex.get(eventId) ?? 0;
    run.deltaIndex.set(eventId, index + 1);
    try {
      this.#ctx.client.notify("session.event_delta", {
        session_id: state.id,
        turn_id: run.turnId,
        event_id: eventId,
        delta,
        index,
      });
    } catch (error) {
      // Deltas are lossy: a missing connection drops them. A malformed one is the caller's bug.
      if (error instanceof InvalidOutgoingParamsError || error instanceof FrameTooLargeError) {
        throw error;
      }
    }
  }
}
