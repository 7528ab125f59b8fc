/**
 * Watching a harness: `harness.observe(listener)` receives every change of its executors,
 * sessions, tool calls, durable events, deltas and interactions as a typed
 * {@linkcode HarnessObservation}, for tools such as an inspector or a metrics exporter.
 *
 * Observations are made only while a listener is registered: with none, the harness builds no
 * observation objects and its hot paths (a tool call, a durable event) check one boolean.
 * Listeners run synchronously, in the harness's own turn: keep them quick, and copy what you
 * keep (the objects are the harness's own and are not frozen). A listener that throws is
 * logged and skipped.
 */
import { describeError } from "../protocol/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type {
  Capabilities,
  ExecutorInfo,
  ProtocolVersion,
  SessionEventDeltaParams,
  ToolProgressParams,
} from "../protocol/generated/contract.ts";
import type { Disposable } from "../protocol/peer.ts";
import type { ExecutorGoneReason, SessionState } from "./lifecycle.ts";
import type { SessionEventRecord, ToolCallResult } from "./records.ts";

/** What every observation carries. */
export interface ObservationBase {
  /** When it happened (ms since the epoch, harness clock). */
  readonly at: number;
}

/** An executor registered, or registered again within its lease. */
export interface ExecutorArrivedObservation extends ObservationBase {
  /** `executor.registered`: new; `executor.reconnected`: known, registered again. */
  readonly type: "executor.registered" | "executor.reconnected";
  /** The executor. */
  readonly executorId: string;
  /** The negotiated protocol version. */
  readonly protocol: ProtocolVersion;
  /** What the executor is. */
  readonly info: ExecutorInfo;
  /** What it advertises. */
  readonly capabilities: Capabilities;
  /** The sessions its `resume` reattached. */
  readonly resumedSessions: readonly string[];
  /** When its lease expires without a heartbeat (ms since the epoch). */
  readonly leaseExpiresAt: number | undefined;
}

/** An executor's connection ended; it may come back within its lease. */
export interface ExecutorDisconnectedObservation extends ObservationBase {
  /** What happened. */
  readonly type: "executor.disconnected";
  /** The executor. */
  readonly executorId: string;
  /** When its lease expires unless it comes back (ms since the epoch). */
  readonly leaseExpiresAt: number | undefined;
}

/** An executor is gone for good. */
export interface ExecutorGoneObservation extends ObservationBase {
  /** What happened. */
  readonly type: "executor.gone";
  /** The executor. */
  readonly executorId: string;
  /** Why it is gone. */
  readonly reason: ExecutorGoneReason;
}

/** An executor changed what it advertises (`executor.capabilities.update`). */
export interface ExecutorCapabilitiesObservation extends ObservationBase {
  /** What happened. */
  readonly type: "executor.capabilities";
  /** The executor. */
  readonly executorId: string;
  /** What it advertises. */
  readonly capabilities: Capabilities;
}

/** An executor's lease moved (a heartbeat, a registration, the harness's recovery). */
export interface ExecutorLeaseObservation extends ObservationBase {
  /** What happened. */
  readonly type: "executor.lease";
  /** The executor. */
  readonly executorId: string;
  /** The new expiry (ms since the epoch). */
  readonly expiresAt: number;
}

/** An executor was asked to drain. */
export interface ExecutorDrainingObservation extends ObservationBase {
  /** What happened. */
  readonly type: "executor.draining";
  /** The executor. */
  readonly executorId: string;
}

/** A session changed state (assigned, ready, stopping, ended). */
export interface SessionStateObservation extends ObservationBase {
  /** What happened. */
  readonly type: "session.state";
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** Where the session is now. */
  readonly state: SessionState;
  /** Why it ended (`ended` only). */
  readonly reason?: string;
}

/** A tool call went out (`tool.call` sent; again after a reconnect or a restart). */
export interface ToolDispatchedObservation extends ObservationBase {
  /** What happened. */
  readonly type: "tool.dispatched";
  /** The call. */
  readonly toolCallId: string;
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** The tool's name. */
  readonly tool: string;
  /** The tool's input, as sent (the harness's own object: copy what you keep). */
  readonly input: Readonly<Record<string, unknown>>;
  /** The call's own timeout (`timeout_ms`), when it has one. */
  readonly timeoutMs?: number;
  /** The trace id of the trace context the call carries (`params._meta`), when it has one. */
  readonly traceId?: string;
}

/** The executor acknowledged a tool call (it runs). */
export interface ToolAcknowledgedObservation extends ObservationBase {
  /** What happened. */
  readonly type: "tool.acknowledged";
  /** The call. */
  readonly toolCallId: string;
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
}

/** A tool call reported progress (`tool.progress`). */
export interface ToolProgressObservation extends ObservationBase {
  /** What happened. */
  readonly type: "tool.progress";
  /** The call. */
  readonly toolCallId: string;
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** The notification. */
  readonly progress: ToolProgressParams;
}

/** A tool call ended: its result arrived, or it failed. */
export interface ToolSettledObservation extends ObservationBase {
  /** What happened. */
  readonly type: "tool.settled";
  /** The call. */
  readonly toolCallId: string;
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** The result, when it arrived. */
  readonly result?: ToolCallResult;
  /** Why it failed (`ToolOutcomeUnknownError`, or the executor's refusal). */
  readonly error?: unknown;
}

/** A durable event was accepted (stored before its ACK). */
export interface SessionEventObservation extends ObservationBase {
  /** What happened. */
  readonly type: "session.event";
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** The accepted event. */
  readonly record: SessionEventRecord;
}

/** A preview of an agent event arrived (`session.event_delta`, lossy). */
export interface SessionDeltaObservation extends ObservationBase {
  /** What happened. */
  readonly type: "session.delta";
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** The notification. */
  readonly delta: SessionEventDeltaParams;
}

/** An agent interaction changed (opened, repeated, settled, canceled). */
export interface InteractionObservation extends ObservationBase {
  /** What happened. */
  readonly type: "interaction";
  /** `opened`, `repeated`, `settled` or `canceled`. */
  readonly change: string;
  /** The session. */
  readonly sessionId: string;
  /** The executor. */
  readonly executorId: string;
  /** The platform's interaction id. */
  readonly interactionId: string;
  /** `open`, `resolved`, `expired` or `canceled`. */
  readonly status: string;
  /** The interaction as the agent capability describes it. */
  readonly interaction: unknown;
}

/** Everything `harness.observe` reports. */
export type HarnessObservation =
  | ExecutorArrivedObservation
  | ExecutorDisconnectedObservation
  | ExecutorGoneObservation
  | ExecutorCapabilitiesObservation
  | ExecutorLeaseObservation
  | ExecutorDrainingObservation
  | SessionStateObservation
  | ToolDispatchedObservation
  | ToolAcknowledgedObservation
  | ToolProgressObservation
  | ToolSettledObservation
  | SessionEventObservation
  | SessionDeltaObservation
  | InteractionObservation;

/** Receives observations. */
export type HarnessObserver = (observation: HarnessObservation) => void;

/** The observers of one harness (internal): test `active` before building an observation. */
export class Observers {
  /** Whether anyone listens: build an observation only then. */
  active = false;
  readonly #listeners = new Set<HarnessObserver>();
  readonly #logger: Logger;

  constructor(logger: Logger) {
    this.#logger = logger;
  }

  /** Adds a listener. */
  add(listener: HarnessObserver): Disposable {
    this.#listeners.add(listener);
    this.active = true;
    return {
      dispose: () => {
        this.#listeners.delete(listener);
        this.active = this.#listeners.size > 0;
      },
    };
  }

  /** Hands an observation to every listener. */
  emit(observation: HarnessObservation): void {
    for (const listener of this.#listeners) {
      try {
        listener(observation);
      } catch (error) {
        this.#logger.warn("harness observer failed", { error: describeError(error) });
      }
    }
  }
}
