/**
 * The events of the agent capability's turns on the executor end: durable events numbered per
 * session and sent through the client's event outbox (kept until acknowledged, resent in order
 * after a reconnect), and their deltas as lossy notifications.
 *
 * An event numbered and then found too large for the connection's frames (the harness closed
 * the connection over it with 1009, and the client now sends smaller frames) is replaced under
 * its `event_id` and `sequence` by a `session.error` event (code `event_too_large`): its sequence
 * is not left a gap that every later event of the session would be refused behind.
 */
import { ClientStoppedError } from "../../executor/errors.ts";
import { SEQUENCED_WINDOW } from "../../executor/event-outbox.ts";
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

/** The `error.code` of the `session.error` event sent in place of one too large to send. */
const EVENT_TOO_LARGE = "event_too_large";

/** The events and deltas of every turn the service runs. */
export class TurnEvents {
  readonly #ctx: ServiceContext;
  /**
   * The largest frame an event is numbered for: the client's `maxFrameBytes`, lowered to the
   * send limit the client reported in a refusal (after the harness closed a connection with
   * 1009), so a later event that large is refused before it takes a sequence.
   */
  #maxFrameBytes: number;

  constructor(ctx: ServiceContext) {
    this.#ctx = ctx;
    this.#maxFrameBytes = ctx.host.maxFrameBytes;
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
    let text: string;
    try {
      text = JSON.stringify(params);
    } catch (error) {
      // A BigInt, a cycle, a throwing toJSON or getter, an array too deep for the stack: typed,
      // before a sequence is taken (the value itself stays out of the error).
      return rejected(
        new InvalidOutgoingParamsError("session.event", [{
          path: ["event"],
          message: `cannot be serialized as JSON (${errorName(error)})`,
          code: "not_json",
        }]),
      );
    }
    const bytes = utf8Length(text) + ENVELOPE_BYTES;
    const limit = this.#maxFrameBytes;
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
    return this.#send(state, run, params, internal, bytes);
  }

  /**
   * Sends a numbered event through the outbox and follows its fate: a refusal for good ends the
   * turn, and one too large for the connection's frames is replaced (`bytes`: its size as
   * measured at emit; 0 for a replacement, which is never replaced in turn).
   */
  #send(
    state: SessionState,
    run: TurnRun,
    params: SessionEventParams,
    internal: boolean,
    bytes: number,
  ): Promise<EmittedEvent> {
    const { event_id: eventId, sequence } = params as Required<SessionEventParams>;
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
        if (
          error instanceof FrameTooLargeError && bytes > 0 &&
          this.#replace(state, run, params, internal, bytes, error)
        ) return;
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

  /**
   * The client refused to send a numbered event: its frame is over the send limit, lowered since
   * the event was numbered (the harness closed a connection with 1009 over this frame or a
   * larger one). Its sequence is taken, and every later event of the session would be refused
   * behind the gap (-32013): a `session.error` event takes its place, under its `event_id` and
   * `sequence`, so the turn and the session go on. `emit` has rejected with the client's
   * `FrameTooLargeError`; later events that large are refused before they are numbered.
   *
   * The replacement queues behind the session's events still unacknowledged, which the harness
   * refuses (-32013) until it has arrived; the outbox resends from the first of them, at most
   * {@linkcode SEQUENCED_WINDOW} at a time. With that many waiting it would never reach the
   * replacement and resend them without end: nothing is sent then (false), and the session's
   * later events are given up on as behind any gap (the turn is canceled).
   */
  #replace(
    state: SessionState,
    run: TurnRun,
    params: SessionEventParams,
    internal: boolean,
    bytes: number,
    error: FrameTooLargeError,
  ): boolean {
    if (error.limit < this.#maxFrameBytes) this.#maxFrameBytes = error.limit;
    const type = String((params.event as { type?: unknown }).type);
    const fields = {
      session_id: state.id,
      sequence: params.sequence,
      event_id: params.event_id,
      type,
      internal,
      bytes,
      max_send_bytes: error.limit,
    };
    if (state.pending.size >= SEQUENCED_WINDOW) {
      this.#ctx.logger.warn(
        "agent event too large for the harness, too many events behind it to take its place",
        { ...fields, unacknowledged: state.pending.size },
      );
      return false;
    }
    this.#ctx.logger.warn(
      "agent event too large for the harness: a session.error took its place",
      fields,
    );
    const replacement: SessionEventParams = {
      ...params,
      event: {
        type: "session.error",
        error: {
          message: `${type} event not delivered: the harness refuses its frame of about ` +
            `${bytes} bytes (this executor now sends frames of at most ${error.limit})`,
          code: EVENT_TOO_LARGE,
        },
      },
    };
    // Its rejection is handled (logged, and the turn ended for a refusal for good) in #send.
    void this.#send(state, run, replacement, internal, 0);
    return true;
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

/** The class name of what a serializer threw, read without trusting it. */
function errorName(error: unknown): string {
  try {
    const name = (error as { name?: unknown } | null)?.name;
    return typeof name === "string" ? name : typeof error;
  } catch {
    return typeof error;
  }
}
