/**
 * What the parts of a harness share (internal): time, logging, the tool-call ledger, the
 * session registry, and the hooks through which executors and sessions report back.
 */
import type { Clock } from "../protocol/clock.ts";
import type { AgentHost } from "./agent-host.ts";
import type { Logger } from "../protocol/logger.ts";
import type { SessionEventSink } from "./event-log.ts";
import type { ExecutorHandle } from "./executor-handle.ts";
import type { Leases } from "./lease.ts";
import type { Session } from "./session.ts";
import type { ToolCallLedger } from "./tool-call-ledger.ts";

/** What happened to an executor, as reported by {@linkcode ExecutorEvent}. */
export type ExecutorEventType =
  /** A new executor registered. */
  | "registered"
  /** An executor known to the harness registered again within its lease (resume or replacement). */
  | "reconnected"
  /** Its connection ended; it may reconnect within its lease. */
  | "disconnected"
  /** It is gone for good: lease expired, closed, or the harness closed. */
  | "gone";

/**
 * A change of the harness's executors. `registered` and `reconnected` are emitted once the
 * register result has been written, so a listener can send to the executor at once.
 */
export interface ExecutorEvent {
  /** What happened: registered, reconnected, disconnected or gone. */
  readonly type: ExecutorEventType;
  /** The executor it happened to. */
  readonly executor: ExecutorHandle;
}

/** Shared state of one harness (internal). */
export interface HarnessContext {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly ledger: ToolCallLedger;
  readonly heartbeatIntervalMs: number;
  /** The executors' leases (two heartbeat intervals each), on one timer. */
  readonly leases: Leases;
  readonly requestTimeoutMs: number | undefined;
  /** Every live session of the harness, by id (ids are unique across executors). */
  readonly sessions: Map<string, Session>;
  readonly eventSink: SessionEventSink | undefined;
  /** How much of each session's event log is kept in memory. */
  readonly eventRetention: { readonly maxRecords?: number; readonly maxBytes?: number };
  readonly fileServiceUrl: string | undefined;
  /** The agent platform's host, when the harness serves the agent capability. */
  readonly agent: AgentHost | undefined;
  /** Reports a change of an executor to the harness's listeners. */
  emit(event: ExecutorEvent): void;
  /** The executor is gone for good: forget it. */
  forget(executor: ExecutorHandle): void;
}

/** Runs `fn` after the current request's response has been written (a macrotask later). */
export function afterReply(fn: () => void): void {
  globalThis.setTimeout(fn, 0);
}
