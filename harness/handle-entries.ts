/**
 * What the brain's handles read of the state behind them (internal): state.ts's `ExecutorEntry`
 * and `SessionEntry` have these shapes.
 *
 * Named here, not imported: state.ts imports the handles (an entry makes its view), so the
 * handles cannot import state.ts back (a cycle, type imports included). An entry holds its view
 * (`handle`, `view`); the shapes take the views' classes as parameters (`Handle`, `View`, given
 * by handles.ts), so that this module need not import handles.ts either.
 *
 * @module
 */
import type {
  Capabilities,
  SessionMetadata,
  SessionStatusParams,
} from "../protocol/generated/contract.ts";
import type { EventLog } from "./event-log.ts";
import type { Lease } from "./lease.ts";
import type { ExecutorEnd, ExecutorGoneReason, SessionEnd, SessionState } from "./lifecycle.ts";
import type { Principal } from "./principal.ts";
import type { StoredRegistration } from "./records.ts";

/** What an executor's handle reads of its entry (internal). */
export interface ExecutorEntryShape<Handle = unknown, View = unknown> {
  readonly id: string;
  readonly principal: Principal;
  readonly register: StoredRegistration;
  readonly capabilities: Capabilities;
  readonly draining: boolean;
  readonly gone: ExecutorGoneReason | undefined;
  /** The registered connection while one is open (a handle reads only whether there is one). */
  readonly connection: object | undefined;
  readonly lease: Lease | undefined;
  readonly sessions: ReadonlyMap<string, SessionEntryShape<Handle, View>> | undefined;
  /** The executor's handle (`ExecutorHandle`). */
  readonly handle: Handle;
  readonly closed: Promise<ExecutorEnd>;
}

/** What a session's view reads of its entry (internal). */
export interface SessionEntryShape<Handle = unknown, View = unknown> {
  readonly id: string;
  readonly executor: ExecutorEntryShape<Handle, View>;
  readonly metadata: SessionMetadata;
  readonly log: EventLog;
  readonly state: SessionState;
  readonly reported: SessionStatusParams | undefined;
  readonly ended: Promise<SessionEnd>;
  /** The session's view (`Session`). */
  readonly view: View;
}
