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
import type { Logger } from "../protocol/logger.ts";
import type {
  Capabilities,
  ExecutorInfo,
  ProtocolVersion,
  SessionEventDeltaParams,
  ToolProgressParams,
} from "../protocol/generated/contract.ts";
import type { Disposable } from "../protocol/peer.ts";
import type { ExecutorGoneReason, SessionState } from "./handles.ts";
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
  readonly executorId: string;
  readonly protocol: ProtocolVersion;
  readonly info: ExecutorInfo;
  readonly capabilities: Capabilities;
  /** The sessions its `resume` reattached. */
  readonly resumedSessions: readonly string[];
  /** When its lease expires without a heartbeat (ms since the epoch). */
  readonly leaseExpiresAt: number | undefined;
}

/** An executor's connection ended; it may come back within its lease. */
export interface ExecutorDisconnectedObservation extends ObservationBase {
  readonly type: "executor.disconnected";
  readonly executorId: string;
  readonly leaseExpiresAt: number | undefined;
}

/** An executor is gone for good. */
export interface ExecutorGoneObservation extends ObservationBase {
  readonly type: "executor.gone";
  readonly executorId: string;
  readonly reason: ExecutorGoneReason;
}

/** An executor changed what it advertises (`executor.capabilities.update`). */
export interface ExecutorCapabilitiesObservation extends ObservationBase {
  readonly type: "executor.capabilities";
  readonly executorId: string;
  readonly capabilities: Capabilities;
}

/** An executor's lease moved (a heartbeat, a registration, the harness's recovery). */
export interface ExecutorLeaseObservation extends ObservationBase {
  readonly type: "executor.lease";
  readonly executorId: string;
  readonly expiresAt: number;
}

/** An executor was asked to drain. */
export interface ExecutorDrainingObservation extends ObservationBase {
  readonly type: "executor.draining";
  readonly executorId: string;
}

/** A session changed state (assigned, ready, stopping, ended). */
export interface SessionStateObservation extends ObservationBase {
  readonly type: "session.state";
  readonly sessionId: string;
  readonly executorId: string;
  readonly state: SessionState;
  /** Why it ended (`ended` only). */
  readonly reason?: string;
}

/** A tool call went out (`tool.call` sent; again after a reconnect or a restart). */
export interface ToolDispatchedObservation extends ObservationBase {
  readonly type: "tool.dispatched";
  readonly toolCallId: string;
  readonly sessionId: string;
  readonly executorId: string;
  readonly tool: string;
}

/** The executor acknowledged a tool call (it runs). */
export interface ToolAcknowledgedObservation extends ObservationBase {
  readonly type: "tool.acknowledged";
  readonly toolCallId: string;
  readonly sessionId: string;
  readonly executorId: string;
}

/** A tool call reported progress (`tool.progress`). */
export interface ToolProgressObservation extends ObservationBase {
  readonly type: "tool.progress";
  readonly toolCallId: string;
  readonly sessionId: string;
  readonly executorId: string;
  readonly progress: ToolProgressParams;
}

/** A tool call ended: its result arrived, or it failed. */
export interface ToolSettledObservation extends ObservationBase {
  readonly type: "tool.settled";
  readonly toolCallId: string;
  readonly sessionId: string;
  readonly executorId: string;
  /** The result, when it arrived. */
  readonly result?: ToolCallResult;
  /** Why it failed (`ToolOutcomeUnknownError`, or the executor's refusal). */
  readonly error?: unknown;
}

/** A durable event was accepted (stored before its ACK). */
export interface SessionEventObservation extends ObservationBase {
  readonly type: "session.event";
  readonly sessionId: string;
  readonly executorId: string;
  readonly record: SessionEventRecord;
}

/** A preview of an agent event arrived (`session.event_delta`, lossy). */
export interface SessionDeltaObservation extends ObservationBase {
  readonly type: "session.delta";
  readonly sessionId: string;
  readonly executorId: string;
  readonly delta: SessionEventDeltaParams;
}

/** An agent interaction changed (opened, repeated, settled, canceled). */
export interface InteractionObservation extends ObservationBase {
  readonly type: "interaction";
  /** `opened`, `repeated`, `settled` or `canceled`. */
  readonly change: string;
  readonly sessionId: string;
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
        this.#logger.warn("harness observer failed", { error: String(error) });
      }
    }
  }
}
