/**
 * The plug point of the agent capability on the harness end: what the harness calls on the agent
 * platform it was given (`new Harness({ agent })`). The platform (`agent/platform.ts`) registers
 * its implementation here, so the harness reaches it without depending on the agent module and
 * the platform's public API stays free of these hooks.
 *
 * Internal, except {@linkcode NoAgentPlatformError}.
 */
import type { Clock } from "../protocol/clock.ts";
import { LocalError } from "../protocol/errors.ts";
import type {
  Ack,
  AgentCustomToolResultParams,
  CustomToolResultResult,
  InteractionCancelParams,
  InteractionRequestParams,
  InteractionRequestResult,
  InteractionResponseParams,
  InteractionResponseResult,
  ModelTokenRefreshParams,
  ModelTokenRefreshResult,
  SessionCloseResult,
  SessionEventDeltaParams,
  ToolsTokenRefreshParams,
  ToolsTokenRefreshResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnInputParams,
  TurnStartParams,
  TurnStartResult,
} from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { CallOptions, Disposable } from "../protocol/peer.ts";
import type { ExecutorEvent } from "./context.ts";
import type { SessionEventRecord } from "./event-log.ts";
import type { ExecutorHandle } from "./executor-handle.ts";

/** What the harness hands its agent platform once. */
export interface AgentHarnessLink {
  readonly clock: Clock;
  readonly logger: Logger;
  /** Executor changes (registered, reconnected, disconnected, gone). */
  onExecutor(listener: (event: ExecutorEvent) => void): Disposable;
}

/** Options of `ExecutorHandle.closeAgentSession`. */
export interface CloseAgentSessionOptions {
  /** Sent in `session.close`. */
  reason?: string;
  /** Stops waiting (rejects with `RequestAbortedError`). */
  signal?: AbortSignal;
  /**
   * How long to wait for `session.ended` after the executor accepted the close; then the harness
   * ends the session itself (reason `close_timeout`). Default 60 s.
   */
  timeoutMs?: number;
}

/** A `turn.input` as `sendTurnInput` takes it: `input_id` is generated when absent. */
export type TurnInputRequest = Omit<TurnInputParams, "input_id"> & { input_id?: string };

/** The agent capability's harness side, as the harness calls it (internal). */
export interface AgentHost {
  /** Called once, by the harness that was given the platform. */
  attach(link: AgentHarnessLink): void;
  /** A durable agent event was accepted (before its ACK: throwing refuses it). */
  acceptEvent(record: SessionEventRecord): void | Promise<void>;
  // harness → executor
  startTurn(
    executor: ExecutorHandle,
    params: TurnStartParams,
    options: CallOptions,
  ): Promise<TurnStartResult>;
  sendTurnInput(
    executor: ExecutorHandle,
    params: TurnInputRequest,
    options: CallOptions,
  ): Promise<Ack>;
  cancelTurn(
    executor: ExecutorHandle,
    params: TurnCancelParams,
    options: CallOptions,
  ): Promise<TurnCancelResult>;
  closeAgentSession(
    executor: ExecutorHandle,
    sessionId: string,
    options: CloseAgentSessionOptions,
  ): Promise<SessionCloseResult>;
  respondInteraction(
    executor: ExecutorHandle,
    params: InteractionResponseParams,
    options: CallOptions,
  ): Promise<InteractionResponseResult>;
  sendCustomToolResult(
    executor: ExecutorHandle,
    params: AgentCustomToolResultParams,
    options: CallOptions,
  ): Promise<CustomToolResultResult>;
  // executor → harness
  delta(executor: ExecutorHandle, params: SessionEventDeltaParams): void;
  requestInteraction(
    executor: ExecutorHandle,
    params: InteractionRequestParams,
  ): Promise<InteractionRequestResult>;
  cancelInteraction(executor: ExecutorHandle, params: InteractionCancelParams): Ack;
  modelToken(
    executor: ExecutorHandle,
    params: ModelTokenRefreshParams,
  ): Promise<ModelTokenRefreshResult>;
  toolsToken(
    executor: ExecutorHandle,
    params: ToolsTokenRefreshParams,
  ): Promise<ToolsTokenRefreshResult>;
}

const hosts = new WeakMap<object, AgentHost>();

/** Registers the host of an agent platform (its constructor calls this). */
export function registerAgentHost(platform: object, host: AgentHost): void {
  hosts.set(platform, host);
}

/** The host of an agent platform; throws when `platform` is not one. */
export function agentHostOf(platform: object): AgentHost {
  const host = hosts.get(platform);
  if (!host) throw new NoAgentPlatformError("the agent option is not an AgentPlatform");
  return host;
}

/** An agent method was used on a harness built without `agent` (an `AgentPlatform`). */
export class NoAgentPlatformError extends LocalError {
  /** Defaults to a message saying how to pass a platform. */
  constructor(
    message =
      "this Harness has no agent platform: pass new Harness({ agent: new AgentPlatform() })",
  ) {
    super(message);
    this.name = "NoAgentPlatformError";
  }
}
