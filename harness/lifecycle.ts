/**
 * Where an executor or a session is in its life, and how it ended: what the brain's handles
 * (`ExecutorHandle`, `Session`: handles.ts) report and the harness's observations carry.
 *
 * @module
 */

/** Why an executor is gone. */
export type ExecutorGoneReason = "lease_expired" | "closed" | "harness_closed";

/** How an executor ended (`ExecutorHandle.closed`). */
export interface ExecutorEnd {
  /** Why it is gone. */
  readonly reason: ExecutorGoneReason;
}

/** Where a session is, as the harness sees it (`Session.state`). */
export type SessionState = "assigning" | "assigned" | "ready" | "stopping" | "ended";

/** How a session ended (`Session.ended`). */
export interface SessionEnd {
  /** `session.ended`'s reason from the executor, or the harness's: `lease_expired`, `lost`, ... */
  readonly reason: string;
}
