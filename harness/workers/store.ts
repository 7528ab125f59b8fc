/**
 * What the edge harness keeps in Durable Object storage, and the deadline index that multiplexes
 * every timer (leases, token deadlines, register and stop timeouts, purges) onto the object's
 * single alarm. Nothing here lives in object fields: an evicted object is rebuilt from storage
 * and the socket attachments on its next event.
 *
 * Keys:
 * - `x:<executor_id>` → {@linkcode ExecutorRecord}
 * - `s:<session_id>` → {@linkcode SessionRecord}; `xs:<executor_id>:<session_id>` indexes the
 *   live sessions of an executor
 * - `c:<tool_call_id>` → {@linkcode CallRecord}; `p:<executor_id>:<tool_call_id>` indexes the
 *   unsettled calls of an executor (value: the session id); `sc:<session_id>:<tool_call_id>`
 *   lists every call of a session (for the purge)
 * - `o:<connection_id>:<rpc_id>` → {@linkcode OutgoingRecord}: a request the harness sent and
 *   whose response has not arrived
 * - `e:<session_id>:<index>` → a durable event; `er:<session_id>:<rpc key>` and
 *   `ee:<session_id>:<event_id>` deduplicate them
 * - `v:<index>` → {@linkcode ExecutorFeedEvent}, the feed of executor changes (the newest
 *   {@linkcode EXECUTOR_EVENTS_KEPT}); `v#` → the next index
 * - `d:<due>:<name>` and `dn:<name>` → the deadline index (see {@linkcode Deadlines})
 */
import type {
  Capabilities,
  ExecutorInfo,
  ProtocolVersion,
  SessionMetadata,
  SessionStatus,
  ToolCallParams,
  ToolProgressParams,
} from "../../protocol/generated/contract.ts";
import type { JsonRpcErrorObject } from "../../protocol/errors.ts";
import type { CredentialScope, Principal } from "../principal.ts";
import type { ToolCallResult, ToolCallState } from "../tool-call-ledger.ts";
import type { DurableObjectStorageLike } from "./types.ts";

/** A principal as stored (expiry as ms since the epoch). */
export interface StoredPrincipal {
  scope?: CredentialScope;
  environmentId?: string;
  machineId?: string;
  credentialId?: string;
  executorId?: string;
  expiresAt?: number;
}

/** Converts a principal to its stored form. */
export function storePrincipal(principal: Principal): StoredPrincipal {
  const at = principal.expiresAt;
  const out: StoredPrincipal = {};
  if (principal.scope !== undefined) out.scope = principal.scope;
  if (principal.environmentId !== undefined) out.environmentId = principal.environmentId;
  if (principal.machineId !== undefined) out.machineId = principal.machineId;
  if (principal.credentialId !== undefined) out.credentialId = principal.credentialId;
  if (principal.executorId !== undefined) out.executorId = principal.executorId;
  if (at !== undefined) out.expiresAt = at instanceof Date ? at.getTime() : at;
  return out;
}

/**
 * One WebSocket, kept in its attachment (so it survives hibernation with the socket itself).
 * Small on purpose: an attachment holds at most 2 KiB.
 */
export interface ConnectionAttachment {
  /** `conn_<hex>`, also the socket's tag. */
  readonly id: string;
  readonly protocol: ProtocolVersion;
  /** The principal `authenticate` returned (replaced by a refreshed token's). */
  principal: StoredPrincipal;
  state: "unregistered" | "registered" | "closed";
  /** The executor bound by `executor.register`. */
  executorId?: string;
  /** Requests refused before `executor.register`. */
  refused: number;
  /** The executor sent `executor.close`: its connection ends for good. */
  forGood?: boolean;
}

/** An executor the object holds (registered; lease not expired). */
export interface ExecutorRecord {
  readonly id: string;
  principal: StoredPrincipal;
  protocol: ProtocolVersion;
  info: ExecutorInfo;
  capabilities: Capabilities;
  environmentId: string;
  machineId?: string;
  maxSessions?: number;
  /** The registered connection, when one is open. */
  connection?: string;
  draining: boolean;
  /** Lease expiry, ms since the epoch (renewed by heartbeats). */
  leaseExpiresAt: number;
  registeredAt: number;
}

/** Where a session is. */
export type StoredSessionState = "assigning" | "assigned" | "ready" | "stopping" | "ended";

/** A session, live or recently ended. */
export interface SessionRecord {
  readonly id: string;
  readonly executorId: string;
  metadata: SessionMetadata;
  tools?: string[];
  state: StoredSessionState;
  /** Why it ended. */
  endReason?: string;
  /** The executor's refusal of `session.assign`, when it refused. */
  refusal?: JsonRpcErrorObject;
  /** The last `session.status` the executor reported. */
  reported?: { status: SessionStatus; detail?: string };
  /** How many durable events were accepted. */
  events: number;
  /** The highest accepted agent sequence. */
  ackedSequence: number;
  createdAt: number;
  endedAt?: number;
}

/** A failure of a tool call as the brain API reports it. */
export interface CallFailure {
  /** A JSON-RPC code (the executor refused the call) or a local code such as `tool_outcome_unknown`. */
  code: number | string;
  /** What went wrong, in words. */
  message: string;
  /** The error's `data`, when it had any. */
  data?: unknown;
}

/** A tool call the object dispatched. */
export interface CallRecord {
  readonly params: ToolCallParams;
  readonly executorId: string;
  state: ToolCallState;
  /** The connection the latest `tool.call` went out on. */
  dispatchedOn?: string;
  result?: ToolCallResult;
  error?: CallFailure;
  /** The latest `tool.progress` notifications (lossy, bounded). */
  progress: ToolProgressParams[];
  createdAt: number;
  settledAt?: number;
}

/** A request the harness sent, awaiting its response. */
export interface OutgoingRecord {
  readonly method: string;
  /** What it is about: a tool call id, a session id or an executor id. */
  readonly ref: string;
}

/** What happened to an executor. */
export type ExecutorFeedEventType = "registered" | "reconnected" | "disconnected" | "gone";

/** One entry of the executor feed (`GET .../executor-events`). */
export interface ExecutorFeedEvent {
  /** 1-based position in the feed. */
  index: number;
  /** What happened. */
  type: ExecutorFeedEventType;
  /** To which executor. */
  executor_id: string;
  /** `executor.name` it registered with. */
  name: string;
  /** Why it is gone (`lease_expired`, `closed`). */
  reason?: string;
  /** When (ISO 8601). */
  at: string;
}

/** How many executor events the feed keeps. */
export const EXECUTOR_EVENTS_KEPT = 1000;

/** Storage keys. */
export const key = {
  executor: (id: string): string => `x:${id}`,
  executorSession: (executorId: string, sessionId: string): string =>
    `xs:${executorId}:${sessionId}`,
  executorSessions: (executorId: string): string => `xs:${executorId}:`,
  session: (id: string): string => `s:${id}`,
  call: (id: string): string => `c:${id}`,
  pending: (executorId: string, callId: string): string => `p:${executorId}:${callId}`,
  pendingOf: (executorId: string): string => `p:${executorId}:`,
  sessionCall: (sessionId: string, callId: string): string => `sc:${sessionId}:${callId}`,
  sessionCalls: (sessionId: string): string => `sc:${sessionId}:`,
  outgoing: (connectionId: string, rpcId: string): string => `o:${connectionId}:${rpcId}`,
  outgoingOf: (connectionId: string): string => `o:${connectionId}:`,
  event: (sessionId: string, index: number): string =>
    `e:${sessionId}:${String(index).padStart(10, "0")}`,
  events: (sessionId: string): string => `e:${sessionId}:`,
  eventRpc: (sessionId: string, rpcKey: string): string => `er:${sessionId}:${rpcKey}`,
  eventId: (sessionId: string, eventId: string): string => `ee:${sessionId}:${eventId}`,
  executorEvent: (index: number): string => `v:${String(index).padStart(10, "0")}`,
  executorEventNext: "v#",
} as const;

/** The last part of a key after `prefix`. */
export function suffix(fullKey: string, prefix: string): string {
  return fullKey.slice(prefix.length);
}

/** Deletes keys in batches of 128, the most one storage call takes. */
export async function deleteKeys(storage: DurableObjectStorageLike, keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 128) await storage.delete(keys.slice(i, i + 128));
}

/** Deletes every key with one of `prefixes` (storage deletes at most 128 keys per call). */
export async function deletePrefixes(
  storage: DurableObjectStorageLike,
  prefixes: string[],
): Promise<void> {
  for (const prefix of prefixes) {
    for (;;) {
      const keys = [...(await storage.list({ prefix, limit: 128 })).keys()];
      if (keys.length === 0) break;
      await storage.delete(keys);
      if (keys.length < 128) break;
    }
  }
}

const DUE_DIGITS = 15;

/**
 * Named deadlines on the single alarm. Each deadline is two keys: `dn:<name>` → its due time
 * and `d:<due, zero-padded>:<name>`, so the earliest is the first key of the `d:` range and the
 * alarm is always set to it. A deadline that moves often (the lease) is better left in place
 * and re-armed when it fires early (see `HarnessObject.alarm`).
 */
export class Deadlines {
  readonly #storage: DurableObjectStorageLike;

  constructor(storage: DurableObjectStorageLike) {
    this.#storage = storage;
  }

  /** Sets (or moves) deadline `name` to `at`, and pulls the alarm forward when it is earlier. */
  async set(name: string, at: number): Promise<void> {
    const due = Math.max(0, Math.ceil(at));
    const previous = await this.#storage.get<number>(`dn:${name}`);
    if (previous === due) return;
    if (previous !== undefined) await this.#storage.delete(dueKey(previous, name));
    await this.#storage.put({ [`dn:${name}`]: due, [dueKey(due, name)]: name });
    const alarm = await this.#storage.getAlarm();
    if (alarm === null || due < alarm) await this.#storage.setAlarm(due);
  }

  /** Removes deadline `name` (the alarm may still fire once, and finds nothing due). */
  async clear(name: string): Promise<void> {
    const previous = await this.#storage.get<number>(`dn:${name}`);
    if (previous === undefined) return;
    await this.#storage.delete([`dn:${name}`, dueKey(previous, name)]);
  }

  /** Removes and returns the names of the deadlines due at `now`, earliest first. */
  async takeDue(now: number): Promise<string[]> {
    const end = `d:${String(Math.floor(now) + 1).padStart(DUE_DIGITS, "0")}`;
    const due = await this.#storage.list<string>({ prefix: "d:", end });
    if (due.size === 0) return [];
    const names = [...due.values()];
    await deleteKeys(this.#storage, [...due.keys(), ...names.map((name) => `dn:${name}`)]);
    return names;
  }

  /** Sets the alarm to the earliest remaining deadline, or deletes it when none remains. */
  async rearm(): Promise<void> {
    const first = await this.#storage.list<string>({ prefix: "d:", limit: 1 });
    const [next] = first.keys();
    if (next === undefined) {
      await this.#storage.deleteAlarm();
      return;
    }
    await this.#storage.setAlarm(Number(next.slice(2, 2 + DUE_DIGITS)));
  }
}

function dueKey(due: number, name: string): string {
  return `d:${String(due).padStart(DUE_DIGITS, "0")}:${name}`;
}
