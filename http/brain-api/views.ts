/**
 * What the brain API shows of executors, sessions and tool calls: the JSON views its routes
 * answer with, made from the harness's public handles.
 *
 * Portable: no runtime API.
 *
 * @module
 */
import type {
  Capabilities,
  ExecutorInfo,
  ProtocolVersion,
  SessionMetadata,
} from "../../protocol/generated/contract.ts";
import type { ExecutorHandle, Session } from "../../harness/handles.ts";
import type { SessionState } from "../../harness/lifecycle.ts";
import type { ToolCallResult } from "../../harness/records.ts";
import type { ApiErrorBody } from "../shared/api-error.ts";

/** An executor as the brain API shows it. */
export interface BrainExecutorView {
  /** Its id. */
  executor_id: string;
  /** Whether a registered connection is open now (it may reconnect within its lease). */
  connected: boolean;
  /** Whether it was asked to drain (new sessions are refused). */
  draining: boolean;
  /** Whether it is gone for good. */
  gone: boolean;
  /** The negotiated subprotocol. */
  protocol: ProtocolVersion;
  /** `""` for a machine-scoped executor. */
  environment_id: string;
  /** The machine of a machine-scoped executor. */
  machine_id?: string;
  /** What it registered as. */
  executor: ExecutorInfo;
  /** What it advertises. */
  capabilities: Capabilities;
  /** Most sessions it holds at once, when it said. */
  max_sessions?: number;
  /** When its lease expires without a heartbeat (ISO 8601). */
  lease_expires_at?: string;
  /** Its live sessions. */
  sessions: string[];
}

/** A session as the brain API shows it. */
export interface BrainSessionView {
  /** Its id. */
  session_id: string;
  /** The executor it runs on. */
  executor_id: string;
  /** Where it is. */
  state: SessionState;
  /** The metadata it was assigned with. */
  metadata: SessionMetadata;
  /** Why it ended, once it has. */
  end_reason?: string;
  /** The last `session.status` the executor reported. */
  reported_status?: { status: string; detail?: string };
}

/** A tool call as the brain API shows it. */
export interface BrainToolCallView {
  /** Its id (generated when the request had none). */
  tool_call_id: string;
  /** Its session. */
  session_id: string;
  /** `settled` once its outcome is known; else where the harness has it, or `pending`. */
  state: string;
  /** The executor's `tool.result`, once it arrived. */
  result?: ToolCallResult;
  /** Why no result will come (`tool_outcome_unknown`, with `data.reason`). */
  error?: BrainError;
}

/** The error member of every error answer: `{"error": BrainError}` (the HTTP faces' one shape). */
export type BrainError = ApiErrorBody;

/** `executor` as `GET /executors` shows it. */
export function executorView(executor: ExecutorHandle): BrainExecutorView {
  const lease = executor.leaseExpiresAt;
  return {
    executor_id: executor.id,
    connected: executor.connected,
    draining: executor.draining,
    gone: executor.gone,
    protocol: executor.protocol,
    environment_id: executor.environmentId,
    ...(executor.machineId !== undefined ? { machine_id: executor.machineId } : {}),
    executor: executor.info,
    capabilities: executor.capabilities,
    ...(executor.maxSessions !== undefined ? { max_sessions: executor.maxSessions } : {}),
    ...(lease !== undefined ? { lease_expires_at: new Date(lease).toISOString() } : {}),
    sessions: [...executor.sessions.keys()],
  };
}

/**
 * Whether `session` ended only here, because this harness is closing (a drain, or fenced): the
 * store keeps it live, and the harness that holds the store next serves it on. Not an end a
 * brain may act on: its requests answer 503 `harness_closed` (repeat them).
 */
export async function endedWithHarness(session: Session): Promise<boolean> {
  if (session.state !== "ended") return false;
  const end = await Promise.race([session.ended, undefined]);
  return end?.reason === "harness_closed";
}

/** `session` as `GET /sessions/{id}` shows it (an ended one with its reason). */
export async function sessionView(session: Session): Promise<BrainSessionView> {
  const state = session.state;
  // An ended session's `ended` has settled: the race reads its reason without waiting.
  const end = state === "ended" ? await Promise.race([session.ended, undefined]) : undefined;
  const reported = session.reportedStatus;
  return {
    session_id: session.id,
    executor_id: session.executor.id,
    state,
    metadata: session.metadata,
    ...(end ? { end_reason: end.reason } : {}),
    ...(reported ? { reported_status: reported } : {}),
  };
}
