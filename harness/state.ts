/**
 * The state behind the brain's handles (internal): one {@linkcode ExecutorEntry} per executor the
 * harness holds and one {@linkcode SessionEntry} per session, each with the view it shows the
 * brain ({@linkcode ExecutorHandle}, {@linkcode Session}: handles.ts).
 *
 * Entries are plain state the harness's services change; nothing here decides anything. This
 * module imports the handles to make them; the handles do not import it back (a cycle, type
 * imports included): they read an entry through the shapes handle-entries.ts names
 * (`ExecutorEntryShape`, `SessionEntryShape`), which these classes satisfy.
 */
import type { Peer } from "../protocol/peer.ts";
import type {
  Capabilities,
  SessionMetadata,
  SessionStatusParams,
  ToolProgressParams,
} from "../protocol/generated/contract.ts";
import { SessionEndedError } from "./errors.ts";
import type { EventLog } from "./event-log.ts";
import type { HarnessServices } from "./handle-services.ts";
import { type AgentOps, ExecutorHandle, Session } from "./handles.ts";
import type { ExecutorEnd, ExecutorGoneReason, SessionEnd, SessionState } from "./lifecycle.ts";
import type { Lease } from "./lease.ts";
import type { McpChannelState } from "./mcp-channel.ts";
import type { Principal } from "./principal.ts";
import type { ExecutorRecord, StoredRegistration } from "./records.ts";
import type { CallbackDeadline } from "./scheduler.ts";
import type { Terminal, TerminalOutput } from "./terminal.ts";

/**
 * The harness's services over its entries (internal): what the harness builds and the entries
 * hand to their views.
 */
export type EntryServices = HarnessServices<ExecutorEntry, SessionEntry, AgentOps>;

/** The registered connection of an executor, as its entry holds it (internal). */
export interface ExecutorLink {
  readonly peer: Peer;
  /** A newer registration took over: closes with 4004. */
  replaced(): void;
}

/**
 * What an executor's entry starts from: a registration just made, or its record read back from
 * the store (which holds these fields and more).
 */
export type ExecutorInit =
  & Pick<ExecutorRecord, "id" | "register" | "capabilities" | "epoch" | "draining">
  & { readonly principal: Principal };

/**
 * One executor the harness holds (internal): stable across reconnects within its lease, gone
 * when the lease expires or it closes for good. Its sessions, channels and the `closed`
 * promise are made on first use: a harness holds one entry per executor, idle most of the time.
 */
export class ExecutorEntry {
  readonly id: string;
  principal: Principal;
  register: StoredRegistration;
  capabilities: Capabilities;
  /** Registrations that did not resume the previous one (a restarted executor process). */
  epoch: number;
  draining: boolean;
  gone: ExecutorGoneReason | undefined = undefined;
  /** The registered connection, while one is open. */
  connection: ExecutorLink | undefined = undefined;
  /** Its lease (none for an executor the harness no longer holds: an ended session's). */
  lease: Lease | undefined = undefined;
  /** Its live sessions, by id. */
  sessions: Map<string, SessionEntry> | undefined = undefined;
  /** Its open MCP channels, by channel id. */
  channels: Map<string, McpChannelState> | undefined = undefined;
  /** The brain's view. */
  readonly handle: ExecutorHandle;
  readonly #onLeaseExpired: ((entry: ExecutorEntry) => void) | undefined;
  #closed: Promise<ExecutorEnd> | undefined;
  #resolveClosed: ((end: ExecutorEnd) => void) | undefined;
  /** Waiting for its next registered connection (see {@linkcode nextConnection}). */
  #connectWaiters: Set<() => void> | undefined;

  constructor(
    init: ExecutorInit,
    services: EntryServices,
    onLeaseExpired?: (entry: ExecutorEntry) => void,
  ) {
    this.id = init.id;
    this.principal = init.principal;
    this.register = init.register;
    this.capabilities = init.capabilities;
    this.epoch = init.epoch;
    this.draining = init.draining;
    this.#onLeaseExpired = onLeaseExpired;
    // The handle is typed with the shapes (handles.ts cannot name this class) and gives its
    // services back only this entry, so services over entries serve it.
    this.handle = new ExecutorHandle(this, services);
  }

  /** Its lease expired (the entry is its lease's holder: no object per executor for that). */
  leaseExpired(): void {
    this.#onLeaseExpired?.(this);
  }

  /** Settles when the executor is gone for good. */
  get closed(): Promise<ExecutorEnd> {
    if (!this.#closed) {
      const gone = this.gone;
      this.#closed = gone
        ? Promise.resolve({ reason: gone })
        : new Promise((resolve) => (this.#resolveClosed = resolve));
    }
    return this.#closed;
  }

  /** Settles `closed` (the executor is gone). */
  settleClosed(reason: ExecutorGoneReason): void {
    this.#resolveClosed?.({ reason });
    this.#resolveClosed = undefined;
    this.connectedAgain();
  }

  /**
   * Resolves once the executor has registered again on a connection, or is gone, or `signal`
   * aborts: an aborted wait is forgotten at once, not held (with what its caller holds) until the
   * executor is back.
   */
  nextConnection(signal?: AbortSignal): Promise<void> {
    if (this.gone || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.#connectWaiters ??= new Set();
      const wake = () => {
        waiters.delete(wake);
        signal?.removeEventListener("abort", wake);
        resolve();
      };
      waiters.add(wake);
      signal?.addEventListener("abort", wake);
    });
  }

  /** Wakes {@linkcode nextConnection}'s waiters: registered again (or gone). */
  connectedAgain(): void {
    const waiters = this.#connectWaiters;
    this.#connectWaiters = undefined;
    for (const wake of waiters ?? []) wake();
  }
}

/** A session as the harness holds it (internal). */
export class SessionEntry {
  readonly id: string;
  readonly executor: ExecutorEntry;
  readonly metadata: SessionMetadata;
  /** Opened by an agent turn (no `session.assign`). */
  readonly agent: boolean;
  readonly log: EventLog;
  state: SessionState;
  /**
   * Stops sent and not yet answered (callers may stop a session more than once at a time): new
   * work is refused while any is on its way (its executor would refuse it, -32002, once it takes
   * the stop), not only once the answer came.
   */
  stopsSent = 0;
  endReason: string | undefined = undefined;
  /** The last `session.status` the executor sent. */
  reported: SessionStatusParams | undefined = undefined;
  readyWaiters: { resolve: () => void; reject: (error: unknown) => void }[] | undefined = undefined;
  /** `tool.progress` listeners by tool call id. */
  progress: Map<string, Set<(progress: ToolProgressParams) => void>> | undefined = undefined;
  /** Open MCP channels by channel id. */
  channels: Map<string, McpChannelState> | undefined = undefined;
  /** Open terminals by terminal id. */
  terminals: Map<string, { terminal: Terminal; output: TerminalOutput }> | undefined = undefined;
  /** The wait for `session.ended` after a stop or a close (ends the session when it passes). */
  endDeadline: CallbackDeadline | undefined = undefined;
  /** The reason the session ends with when `endDeadline` passes. */
  endByReason: string | undefined = undefined;
  /** Settles once the session has ended. */
  readonly ended: Promise<SessionEnd>;
  /** The brain's view. */
  readonly view: Session;
  #resolveEnded!: (end: SessionEnd) => void;

  constructor(
    id: string,
    executor: ExecutorEntry,
    metadata: SessionMetadata,
    state: SessionState,
    agent: boolean,
    log: EventLog,
    services: EntryServices,
  ) {
    this.id = id;
    this.executor = executor;
    this.metadata = metadata;
    this.state = state;
    this.agent = agent;
    this.log = log;
    this.ended = new Promise((resolve) => (this.#resolveEnded = resolve));
    // As for the executor's handle: the view gives its services back only this entry.
    this.view = new Session(this, services);
  }

  /** Settles `ended`. */
  settleEnded(reason: string): void {
    this.#resolveEnded({ reason });
  }
}

/** The error of an operation on an ended session. */
export function sessionEnded(session: SessionEntry): SessionEndedError {
  const reason = session.endReason ??
    (session.state === "stopping" || session.stopsSent > 0 ? "stopping" : "ended");
  return new SessionEndedError(session.id, reason);
}

/**
 * Whether nothing new may start in the session: it has ended, or it is stopping (its executor
 * refuses new work then, -32002).
 */
export function takesNoNewWork(session: SessionEntry): boolean {
  return session.state === "ended" || session.state === "stopping" || session.stopsSent > 0;
}

/** Whether the session has ended (read again after an await: it may have meanwhile). */
export function hasEnded(session: SessionEntry): boolean {
  return session.state === "ended";
}
