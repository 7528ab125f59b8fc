/**
 * What a harness keeps in its {@linkcode HarnessStore}, and under which keys. One place for the
 * key scheme, so every part writes and reads the same keys:
 *
 * | key                               | value                    | written                                   |
 * | --------------------------------- | ------------------------ | ----------------------------------------- |
 * | `x/<executor_id>`                 | {@linkcode ExecutorRecord} | registration, capabilities, drain, disconnect |
 * | `xs/<executor_id>/<session_id>`   | `1`                      | a session assigned (deleted when it ends) |
 * | `s/<session_id>`                  | {@linkcode SessionRecord}  | each state change (`ready` before its ack) |
 * | `se/<ended_at>/<session_id>`      | `1`                      | a session ended (the order of forgetting) |
 * | `ev/<session_id>/<index>`         | {@linkcode StoredEventRow} | before the event's ack (with the events of its turn, from `index` on) |
 * | `c/<tool_call_id>`                | {@linkcode CallRecord}     | before `tool.call` is sent, and with its result before the `tool.result`'s ack |
 * | `a/…`                             | the agent capability's    | (see `agent/harness/platform.ts`)         |
 * | `art/<artifact_id>/…`, `art/o/<n>` | an artifact's description and chunks, and its place in the order of uploads (id, size, whole) | before the upload is answered (`harness/store/store-artifacts.ts`) |
 *
 * Numbers in keys are zero-padded to a fixed width, so key order is numeric order.
 */
import type {
  Artifact,
  Capabilities,
  ContentBlock,
  ErrorInfo,
  ExecutorInfo,
  ProtocolVersion,
  SessionEventPayload,
  SessionMetadata,
  ToolCallParams,
  ToolOutcome,
} from "../protocol/generated/contract.ts";

/** One accepted durable event. */
export interface SessionEventRecord {
  /**
   * 1-based position in the session's log, counting every event ever accepted (dropped ones
   * too): consecutive records a reader receives differ by 1 unless some were dropped between.
   */
  readonly index: number;
  /** The session. */
  readonly session_id: string;
  /** The event (an `AgentEvent` for agent executors). */
  readonly event: SessionEventPayload;
  /** Agent executors: the turn. */
  readonly turn_id?: string;
  /** Agent executors: the event's id. */
  readonly event_id?: string;
  /** Agent executors: the per-session sequence. */
  readonly sequence?: number;
  /** When the harness accepted it (ms since the epoch, harness clock). */
  readonly received_at: number;
}

/** The outcome of a tool call, as reported by the executor's `tool.result`. */
export interface ToolCallResult<S = Record<string, unknown>> {
  /** The call. */
  tool_call_id: string;
  /** The call's session. */
  session_id: string;
  /** How it ended: `completed` (even with `is_error`), `failed`, `canceled` or `timed_out`. */
  outcome: ToolOutcome;
  /** Rendered result (text, images, artifact references); empty when none was sent. */
  content: ContentBlock[];
  /** A tool-level error (the tool ran and reported a failure). */
  is_error: boolean;
  /** Why the call failed or timed out. */
  error?: ErrorInfo;
  /** Artifacts the call produced. */
  artifacts: Artifact[];
  /** The tool's typed result (e.g. `BashResult` for `bash`), when the executor sent one. */
  structured_content?: S;
}

/** The identity of a principal, as stored (its expiry is the connection's, not the executor's). */
export interface StoredPrincipal {
  readonly scope?: "environment" | "machine";
  readonly environmentId?: string;
  readonly machineId?: string;
  readonly credentialId?: string;
  readonly executorId?: string;
}

/** What `executor.register` said, less `capabilities` (kept up to date apart) and `resume`. */
export interface StoredRegistration {
  readonly protocol: ProtocolVersion;
  readonly executor: ExecutorInfo;
  readonly environment_id: string;
  readonly machine_id?: string;
  readonly max_sessions?: number;
}

/** An executor the harness holds. */
export interface ExecutorRecord {
  readonly id: string;
  readonly principal: StoredPrincipal;
  readonly register: StoredRegistration;
  readonly capabilities: Capabilities;
  /** Registrations that did not resume the one before (a restarted executor process). */
  readonly epoch: number;
  readonly draining: boolean;
  /** Its lease's expiry when it was written (a connected executor renews it unwritten). */
  readonly leaseExpiresAt?: number;
  /**
   * Written while no connection held it (after a disconnect, or read back without one): its
   * lease ran on without heartbeats from `leaseExpiresAt`.
   */
  readonly detached?: true;
}

/** Where a session is (the harness's view). */
export type StoredSessionState = "assigning" | "assigned" | "ready" | "stopping" | "ended";

/** A session, live or ended and still remembered. */
export interface SessionRecord {
  readonly id: string;
  readonly executorId: string;
  readonly metadata: SessionMetadata;
  readonly state: StoredSessionState;
  /** Why it ended. */
  readonly endReason?: string;
  /** When it ended (ms since the epoch). */
  readonly endedAt?: number;
  /** Opened by an agent turn (no `session.assign`). */
  readonly agent?: boolean;
  /** Until when the harness waits for `session.ended` after a stop or close. */
  readonly endBy?: number;
  /** The reason the harness ends it with when `endBy` passes. */
  readonly endByReason?: string;
}

/** A durable event as stored: the record a reader gets, and what deduplicates a resend. */
export interface StoredEvent {
  readonly record: SessionEventRecord;
  /** The JSON-RPC id it came with, as `typeof id + ":" + id`. */
  readonly rpc: string;
  /** The size of the frame that carried it (what the retention bound counts). */
  readonly bytes: number;
}

/**
 * What an event's key holds: its {@linkcode StoredEvent}, or the events written together from
 * it on (consecutive indexes, the key's the first), oldest first.
 */
export type StoredEventRow = StoredEvent | readonly StoredEvent[];

/** A failure a settled call keeps. */
export type StoredFailure =
  /** The executor refused the call with a protocol error (it never ran). */
  | {
    readonly kind: "protocol";
    readonly code: number;
    readonly message: string;
    readonly data?: unknown;
  }
  /** The outcome cannot be known (`ToolOutcomeUnknownError`). */
  | { readonly kind: "unknown"; readonly reason: string }
  /** Its `tool.call` was over the link's frame limit: never sent (`FrameTooLargeError`). */
  | { readonly kind: "too_large"; readonly bytes: number; readonly limit: number };

/**
 * A tool call: pending (with what `tool.call` sends), then settled (with its result, or why it
 * failed), under one key from its start to when it is forgotten.
 */
export interface CallRecord {
  readonly sessionId: string;
  readonly executorId: string;
  /** What `tool.call` sends, while it is pending. */
  readonly params?: ToolCallParams;
  /** Settled: the result arrived, or it failed. */
  readonly settled?: true;
  readonly result?: ToolCallResult;
  readonly failure?: StoredFailure;
}

/** The width numbers are padded to in keys (up to 10^15: ms timestamps, indexes). */
const WIDTH = 15;

/** The digits of an event's index that its block's key prefix leaves out. */
const EVENT_BLOCK_DIGITS = 2;
/** How many consecutive event indexes share a key prefix ({@linkcode keys}`.eventBlock`). */
export const EVENT_BLOCK = 10 ** EVENT_BLOCK_DIGITS;

/** `n` zero-padded to the keys' width. */
export function padded(n: number): string {
  return String(n).padStart(WIDTH, "0");
}

/** The keys. */
export const keys = {
  executor: (id: string): string => `x/${id}`,
  executors: "x/",
  executorSession: (executorId: string, sessionId: string): string =>
    `xs/${executorId}/${sessionId}`,
  executorSessions: (executorId: string): string => `xs/${executorId}/`,
  session: (id: string): string => `s/${id}`,
  sessions: "s/",
  ended: (at: number, sessionId: string): string => `se/${padded(at)}/${sessionId}`,
  endedOrder: "se/",
  event: (sessionId: string, index: number): string => `ev/${sessionId}/${padded(index)}`,
  events: (sessionId: string): string => `ev/${sessionId}/`,
  /**
   * The prefix of the events of `sessionId` numbered `block * EVENT_BLOCK` to
   * `(block + 1) * EVENT_BLOCK - 1`: the padded index but its last digits.
   */
  eventBlock: (sessionId: string, block: number): string =>
    `ev/${sessionId}/${padded(block * EVENT_BLOCK).slice(0, -EVENT_BLOCK_DIGITS)}`,
  call: (id: string): string => `c/${id}`,
  calls: "c/",
  /** An artifact's keys: its description (`m`) and its chunks (`c/<n>`). */
  artifact: (id: string): string => `art/${id}/`,
  /** An artifact's place in the order of uploads. */
  artifactOrder: (seq: number): string => `art/o/${padded(seq)}`,
  artifactOrders: "art/o/",
  /** The store's holder record (`harness/store/claim.ts`). */
  holder: "w/holder",
  /** The fencing epoch every batch of the holder checks. */
  epoch: "w/epoch",
  /** The format of the store's records (`STORE_FORMAT`, `harness/store/claim.ts`). */
  format: "w/format",
} as const;
