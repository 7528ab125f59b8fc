/**
 * The seam through which the agent capability plugs into the harness:
 * `new Harness({ agent: capability })` calls `capability.attach(host)` once, and the hooks it
 * returns serve the capability's methods. The harness does not depend on any implementation of
 * it: `AgentPlatform` (`bma-executor-sdk/agent`) is one, and anything that implements
 * {@linkcode AgentExtension} is another.
 *
 * - Harness → executor: `executor.startTurn`, `sendTurnInput`, `cancelTurn`,
 *   `closeAgentSession`, `respondInteraction` and `sendCustomToolResult` call the hooks of
 *   {@linkcode AgentOps}.
 * - Executor → harness: `session.event_delta`, `interaction.request`, `interaction.cancel`,
 *   `model_token.refresh` and `tools_token.refresh` are served by the hooks (a harness without a
 *   capability answers them -32601), and each durable agent event is handed to `acceptEvent`
 *   before its ACK.
 * - The host gives the capability what it needs of the harness: its clock, logger, scheduler
 *   and store, executor changes, the sessions an agent turn opens, and its observers.
 */
import type { Clock } from "../protocol/clock.ts";
import type {
  Ack,
  InteractionCancelParams,
  InteractionRequestParams,
  InteractionRequestResult,
  ModelTokenRefreshParams,
  ModelTokenRefreshResult,
  SessionEventDeltaParams,
  ToolsTokenRefreshParams,
  ToolsTokenRefreshResult,
} from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Disposable, ReplyHooks } from "../protocol/peer.ts";
import type { AgentOps, ExecutorEvent, ExecutorHandle, Session } from "./handles.ts";
import type { InteractionObservation, SessionDeltaObservation } from "./observe.ts";
import type { SessionEventRecord } from "./records.ts";
import type { Scheduler } from "./scheduler.ts";
import type { HarnessStore, MaybePromise } from "./store/store.ts";

export type { AgentOps } from "./handles.ts";

/** What the harness gives the agent capability it was given (once, in `attach`). */
export interface AgentExtensionHost {
  /** The harness's clock. */
  readonly clock: Clock;
  /** The harness's logger (secret-named fields redacted). */
  readonly logger: Logger;
  /**
   * The harness's deadlines: interaction expiries and close waits belong here (they fire from
   * a Durable Object's alarm too). Not part of the public API: the scheduler and its deadlines
   * are the harness's own, which `AgentPlatform` shares; a capability of yours sets its timers
   * on `clock`.
   *
   * @internal
   */
  readonly scheduler: Scheduler;
  /**
   * The harness's store: the capability keeps what it must remember across a restart under
   * keys starting with `a/` (turns, interactions), written before it acknowledges them.
   */
  readonly store: HarnessStore | undefined;
  /** Executor changes (registered, reconnected, disconnected, gone). */
  onExecutor(listener: (event: ExecutorEvent) => void): Disposable;
  /** An executor the harness holds. */
  executor(id: string): ExecutorHandle | undefined;
  /**
   * How many registrations of the executor did not resume the one before (a restarted executor
   * process starts a new epoch: interactions are checked for conflicts within one).
   */
  epoch(executorId: string): number;
  /**
   * The live session `sessionId` of the executor, or a new one opened by an agent turn (there
   * is no `session.assign` or `session.ready`). Throws `SessionRefusedError` when another
   * executor holds the id.
   */
  openSession(executorId: string, sessionId: string): Session;
  /** Ends a live session now (`reason`); its pending tool calls fail. */
  endSession(sessionId: string, reason: string): void;
  /**
   * Waits at most `timeoutMs` for the session's `session.ended`, then ends it (`reason`): the
   * wait survives a restart of the harness.
   */
  awaitSessionEnd(sessionId: string, timeoutMs: number, reason: string): void;
  /** Whether anyone observes the harness (build an observation only then). */
  readonly observing: boolean;
  /** Reports an observation to the harness's observers. */
  observe(observation: InteractionObservation | SessionDeltaObservation): void;
}

/** The hooks an agent capability returns from `attach`. */
export interface AgentExtensionHooks extends AgentOps {
  /**
   * A durable agent event was accepted (before its ACK: throwing or rejecting refuses it, and
   * the executor sends it again).
   */
  acceptEvent(record: SessionEventRecord): void | Promise<void>;
  /** `session.event_delta` from an executor (lossy). */
  delta(executor: ExecutorHandle, params: SessionEventDeltaParams): void;
  /** `interaction.request`; `reply` runs what must follow the answer on the wire. */
  requestInteraction(
    executor: ExecutorHandle,
    params: InteractionRequestParams,
    reply: ReplyHooks,
  ): MaybePromise<InteractionRequestResult>;
  /** `interaction.cancel`. */
  cancelInteraction(executor: ExecutorHandle, params: InteractionCancelParams): Ack;
  /** `model_token.refresh`. */
  modelToken(
    executor: ExecutorHandle,
    params: ModelTokenRefreshParams,
  ): Promise<ModelTokenRefreshResult>;
  /** `tools_token.refresh`. */
  toolsToken(
    executor: ExecutorHandle,
    params: ToolsTokenRefreshParams,
  ): Promise<ToolsTokenRefreshResult>;
  /**
   * Reads back what a previous run of the harness stored (called once, after the harness read
   * its executors and sessions back, before it serves any connection).
   */
  recover?(): MaybePromise<void>;
  /** The harness closed. */
  close?(): void;
}

/** The agent capability of a harness: `new Harness({ agent })`. */
export interface AgentExtension {
  /** Called once by the harness that was given the capability; returns its hooks. */
  attach(host: AgentExtensionHost): AgentExtensionHooks;
}
