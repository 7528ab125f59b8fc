/**
 * One executor as the harness holds it: stable across reconnects within its lease, gone when
 * the lease expires or it closes for good. Sessions are assigned through it, and the
 * capability requests (`fs.mount`, `process.*`, ...) are sent through it.
 */
import type { CallOptions } from "../protocol/peer.ts";
import type {
  Ack,
  AgentCustomToolResultParams,
  Capabilities,
  CustomToolResultResult,
  ExecutorDrainParams,
  ExecutorDrainResult,
  ExecutorHeartbeatResult,
  ExecutorInfo,
  ExecutorRegisterParams,
  FsMountResult,
  FsUnmountResult,
  FsView,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  InteractionResponseParams,
  InteractionResponseResult,
  NotificationMap,
  ProtocolVersion,
  RequestMap,
  SessionAssignParams,
  SessionCloseResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnStartParams,
  TurnStartResult,
} from "../protocol/generated/contract.ts";
import { CloseCode } from "../protocol/generated/errors.ts";
import { ConnectionClosedError, LocalError, ProtocolError } from "../protocol/errors.ts";
import {
  type AgentHost,
  type CloseAgentSessionOptions,
  NoAgentPlatformError,
  type TurnInputRequest,
} from "./agent-host.ts";
import { afterReply, type HarnessContext } from "./context.ts";
import type { ExecutorConnection } from "./connection.ts";
import {
  ExecutorUnavailableError,
  SessionRefusedError,
  ToolOutcomeUnknownError,
  type ToolOutcomeUnknownReason,
} from "./errors.ts";
import type { Lease, LeaseHolder } from "./lease.ts";
import { McpChannel, mcpChannelControl } from "./mcp-channel.ts";
import type { Principal } from "./principal.ts";
import { Session, sessionControl, type SessionHost } from "./session.ts";
import type { ToolCallEntry } from "./tool-call-ledger.ts";

/** Why an executor is gone. */
export type ExecutorGoneReason = "lease_expired" | "closed" | "harness_closed";

/** How an executor ended. */
export interface ExecutorEnd {
  /** Why it is gone. */
  readonly reason: ExecutorGoneReason;
}

/** Options of {@linkcode ExecutorHandle.mount}. */
export interface MountOptions {
  /** The bma-file service URL. Default: the harness's `fileServiceUrl`. */
  serviceUrl?: string;
  /** Aborts the request. */
  signal?: AbortSignal;
}

/** The harness-internal controls of an executor. */
export interface ExecutorControl {
  /** Binds a newly registered connection; returns the ids of the sessions it reattached. */
  attach(connection: ExecutorConnection, params: ExecutorRegisterParams): string[];
  /** The connection ended; `forGood` when the executor sent `executor.close` first. */
  detach(connection: ExecutorConnection, forGood: boolean): void;
  /** Renews the lease for a heartbeat. */
  heartbeat(): ExecutorHeartbeatResult;
  /** Replaces the advertised capabilities (`executor.capabilities.update`). */
  updateCapabilities(capabilities: Capabilities): void;
  /** A session of this executor, if live. */
  session(id: string): Session | undefined;
  /** An open MCP channel of this executor. */
  channel(id: string): McpChannel | undefined;
  /** Forgets a channel. */
  dropChannel(id: string): void;
  /** Ends the executor for good. */
  release(reason: ExecutorGoneReason): void;
  /**
   * Counts registrations that did not resume the previous one: a restarted executor process
   * starts a new epoch (agent interactions are checked for conflicts within one epoch).
   */
  readonly epoch: number;
  /** The live session `id` of this executor, or a new one opened by an agent turn. */
  openAgentSession(id: string): Session;
}

/** The controls of an executor and the host of its sessions: one object per executor. */
type Control = ExecutorControl & SessionHost & LeaseHolder;

// Defined in ExecutorHandle's static block, where the handle's private members are in reach.
let newControl: (executor: ExecutorHandle) => Control;
let controlOf: (executor: ExecutorHandle) => Control;

/** The internal controls of an executor (for the harness's own modules). */
export function executorControl(executor: ExecutorHandle): ExecutorControl {
  return controlOf(executor);
}

/** An executor registered with the harness. */
export class ExecutorHandle {
  /** The executor id (`exec_<machine_id>` for a machine credential). */
  readonly id: string;

  // A harness holds one handle per executor, idle most of the time: what an idle executor does
  // not use (its sessions' and channels' maps, the `closed` promise) is made on first use, and
  // its controls are one object of a class rather than closures.
  readonly #ctx: HarnessContext;
  readonly #principal: Principal;
  readonly #control: Control;
  readonly #lease: Lease;
  #sessions: Map<string, Session> | undefined;
  #channels: Map<string, McpChannel> | undefined;
  #connection: ExecutorConnection | undefined;
  #register!: ExecutorRegisterParams;
  #capabilities: Capabilities = {};
  #draining = false;
  #gone: ExecutorGoneReason | undefined;
  #epoch = 0;
  #closed: Promise<ExecutorEnd> | undefined;
  #resolveClosed: ((end: ExecutorEnd) => void) | undefined;

  /** Internal: executors are created by the harness when they register. */
  constructor(id: string, principal: Principal, ctx: HarnessContext) {
    this.id = id;
    this.#principal = principal;
    this.#ctx = ctx;
    this.#control = newControl(this);
    this.#lease = ctx.leases.lease(this.#control);
  }

  static {
    /** What the harness's modules and the executor's sessions call, in one object. */
    class ExecutorControls implements ExecutorControl, SessionHost, LeaseHolder {
      readonly #executor: ExecutorHandle;

      constructor(executor: ExecutorHandle) {
        this.#executor = executor;
      }

      get capabilities(): Capabilities {
        return this.#executor.#capabilities;
      }

      get epoch(): number {
        return this.#executor.#epoch;
      }

      dispatch(entry: ToolCallEntry): void {
        this.#executor.#dispatch(entry);
      }

      request<M extends HarnessRequestMethod>(
        method: M,
        params: RequestMap[M]["params"],
        options?: CallOptions,
      ): Promise<RequestMap[M]["result"]> {
        return this.#executor.request(method, params, options);
      }

      openMcp(session: Session, server: string): Promise<McpChannel> {
        return this.#executor.#openMcp(session, server);
      }

      attach(connection: ExecutorConnection, params: ExecutorRegisterParams): string[] {
        return this.#executor.#attach(connection, params);
      }

      detach(connection: ExecutorConnection, forGood: boolean): void {
        this.#executor.#detach(connection, forGood);
      }

      heartbeat(): ExecutorHeartbeatResult {
        const executor = this.#executor;
        const at = executor.#lease.renew();
        return { drain: executor.#draining, lease_expires_at: new Date(at).toISOString() };
      }

      updateCapabilities(capabilities: Capabilities): void {
        const executor = this.#executor;
        executor.#capabilities = capabilities;
        if (executor.#connection) executor.#connection.peer.capabilities = capabilities;
      }

      session(id: string): Session | undefined {
        return this.#executor.#sessions?.get(id);
      }

      channel(id: string): McpChannel | undefined {
        return this.#executor.#channels?.get(id);
      }

      dropChannel(id: string): void {
        this.#executor.#channels?.delete(id);
      }

      release(reason: ExecutorGoneReason): void {
        this.#executor.#release(reason);
      }

      openAgentSession(id: string): Session {
        return this.#executor.#openAgentSession(id);
      }

      leaseExpired(): void {
        this.#executor.#expire();
      }
    }
    newControl = (executor) => new ExecutorControls(executor);
    controlOf = (executor) => executor.#control;
  }

  /** Settles when the executor is gone for good. */
  get closed(): Promise<ExecutorEnd> {
    if (!this.#closed) {
      const gone = this.#gone;
      this.#closed = gone
        ? Promise.resolve({ reason: gone })
        : new Promise((resolve) => (this.#resolveClosed = resolve));
    }
    return this.#closed;
  }

  /** The negotiated protocol version of the current (or last) connection. */
  get protocol(): ProtocolVersion {
    return this.#register.protocol;
  }

  /** What the executor is (name, os, arch, version). */
  get info(): ExecutorInfo {
    return this.#register.executor;
  }

  /** The capabilities it advertises (latest `executor.register` or `executor.capabilities.update`). */
  get capabilities(): Capabilities {
    return this.#capabilities;
  }

  /** Its environment id; `""` for a machine-scoped executor. */
  get environmentId(): string {
    return this.#register.environment_id;
  }

  /** Its machine id, when it sent one. */
  get machineId(): string | undefined {
    return this.#register.machine_id ?? this.#principal.machineId;
  }

  /** Most sessions it accepts at once, when it said. */
  get maxSessions(): number | undefined {
    return this.#register.max_sessions;
  }

  /** What `authenticate` established about its credential. */
  get principal(): Principal {
    return this.#principal;
  }

  /** Whether a registered connection is open right now. */
  get connected(): boolean {
    return this.#connection !== undefined;
  }

  /** Whether it was asked to drain (no new sessions). */
  get draining(): boolean {
    return this.#draining;
  }

  /** Whether it is gone for good. */
  get gone(): boolean {
    return this.#gone !== undefined;
  }

  /** When the lease expires without a further heartbeat (ms since the epoch). */
  get leaseExpiresAt(): number | undefined {
    return this.#lease.expiresAt;
  }

  /** Its live sessions, by id. */
  get sessions(): ReadonlyMap<string, Session> {
    return this.#sessions ??= new Map();
  }

  /**
   * Assigns a session (`session.assign`). `metadata.source` defaults to `"harness"` (a
   * long-lived session; any other source is one-shot). A refusal by the executor rejects with
   * its typed error (-32009 `ResourceExhaustedError`, -32012 `CapabilityMissingError`,
   * -32004 `UnavailableError`); a local refusal with `SessionRefusedError`.
   */
  async assignSession(
    params: SessionAssignParams,
    options: CallOptions = {},
  ): Promise<Session> {
    const id = params.session_id;
    if (this.#gone || !this.#connection) throw new SessionRefusedError(id, "executor_unavailable");
    if (this.#draining) throw new SessionRefusedError(id, "draining");
    const assign: SessionAssignParams = {
      ...params,
      metadata: { source: "harness", ...params.metadata },
    };
    const existing = this.#ctx.sessions.get(id);
    if (existing && existing.executor !== this) throw new SessionRefusedError(id, "session_exists");
    if (existing) {
      // A repeat for a session the executor holds is accepted again (retry after a reconnect).
      await this.request("session.assign", assign, options);
      return existing;
    }
    const session = new Session(this, assign, this.#control, this.#ctx);
    // Registered before the request: session.ready may arrive right behind the ack.
    this.#addSession(session);
    try {
      await this.request("session.assign", assign, options);
    } catch (error) {
      sessionControl(session).end("refused", "session_ended");
      throw error;
    }
    sessionControl(session).markAssigned();
    return session;
  }

  /**
   * Mounts bma-file views for a session (`fs.mount`, capability `fs.fuse`). Idempotent by
   * (session, view): the same views with new tokens renew the tokens (`renewed`), a changed
   * path or readonly remounts (`remounted`).
   */
  mount(
    session: Session | string,
    views: FsView[],
    options: MountOptions = {},
  ): Promise<FsMountResult> {
    const serviceUrl = options.serviceUrl ?? this.#ctx.fileServiceUrl;
    if (serviceUrl === undefined) {
      return Promise.reject(
        new LocalError("fs.mount needs a service URL: pass serviceUrl or set fileServiceUrl"),
      );
    }
    return this.request("fs.mount", {
      session_id: typeof session === "string" ? session : session.id,
      service_url: serviceUrl,
      views,
    }, { signal: options.signal });
  }

  /** Unmounts every view of a session (`fs.unmount`); `"unmounted"` also when nothing was mounted. */
  unmount(
    session: Session | string,
    options: { flush?: boolean; signal?: AbortSignal } = {},
  ): Promise<FsUnmountResult> {
    return this.request("fs.unmount", {
      session_id: typeof session === "string" ? session : session.id,
      ...(options.flush !== undefined ? { flush: options.flush } : {}),
    }, { signal: options.signal });
  }

  /**
   * Asks the executor to drain (`executor.drain`): it takes no new sessions and finishes
   * current work. Later heartbeats answer `drain: true` as well.
   */
  drain(params: ExecutorDrainParams = {}, options: CallOptions = {}): Promise<ExecutorDrainResult> {
    this.#draining = true;
    return this.request("executor.drain", params, options);
  }

  /**
   * Sends a harness request to the executor, typed by the contract (`process.start`,
   * `terminal.open`, `skill.install`, ...). Rejects with `CapabilityNotAdvertisedError` for a
   * capability it did not advertise, `ExecutorUnavailableError` while it is not connected.
   */
  request<M extends HarnessRequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    options: CallOptions = {},
  ): Promise<RequestMap[M]["result"]> {
    const connection = this.#connection;
    if (!connection) {
      return Promise.reject(
        new ExecutorUnavailableError(this.id, this.#gone ? "gone" : "disconnected"),
      );
    }
    return connection.peer.call(method, params, this.#withTimeout(options));
  }

  /** Sends a harness notification (`executor.close`, `mcp.message`). */
  notify<M extends HarnessNotificationMethod>(method: M, params: NotificationMap[M]): void {
    const connection = this.#connection;
    if (!connection) {
      throw new ExecutorUnavailableError(this.id, this.#gone ? "gone" : "disconnected");
    }
    connection.peer.notify(method, params);
  }

  /**
   * Closes the executor for good: `executor.close`, then close code 1000. Its sessions end and
   * pending tool calls fail with `ToolOutcomeUnknownError`.
   */
  async close(reason = "closed"): Promise<void> {
    const connection = this.#connection;
    this.#release("closed");
    if (connection) {
      try {
        connection.peer.notify("executor.close", { reason });
      } catch {
        // Already closed: nothing to tell.
      }
      await connection.peer.close(CloseCode.NORMAL, reason);
    }
  }

  // ---- the agent capability (needs `new Harness({ agent })`) ---------------------------------

  /**
   * Starts an agent turn (`turn.start`): opens the session on this executor on first use (no
   * `assignSession`) or continues it; pass `executor_session_ref` from an earlier result to let
   * a restarted executor resume its conversation. Idempotent by `turn_id` (resent after a
   * reconnect within the lease). Refusals reject with the executor's typed error: -32013
   * `ConflictError` (a turn is running: use `sendTurnInput`), -32009 `ResourceExhaustedError`
   * (beyond `agent.max_sessions`), -32004 `UnavailableError` (draining).
   */
  startTurn(params: TurnStartParams, options: CallOptions = {}): Promise<TurnStartResult> {
    return this.#agent((agent) => agent.startTurn(this, params, options));
  }

  /**
   * Adds input to the running turn (`turn.input`), idempotent by `input_id` (generated when
   * absent). A turn that is not running rejects with -32013 `ConflictError`: start a new turn.
   */
  sendTurnInput(params: TurnInputRequest, options: CallOptions = {}): Promise<Ack> {
    return this.#agent((agent) => agent.sendTurnInput(this, params, options));
  }

  /**
   * Cancels the running turn (`turn.cancel`); it ends with `session.status_idle`
   * `turn_outcome: "canceled"` and the session stays open. The turn gets no further tokens.
   */
  cancelTurn(params: TurnCancelParams, options: CallOptions = {}): Promise<TurnCancelResult> {
    return this.#agent((agent) => agent.cancelTurn(this, params, options));
  }

  /**
   * Closes an agent session (`session.close`): the executor cancels a running turn, delivers its
   * events, releases the conversation and sends `session.ended`; this resolves after that.
   * `closed: false` for a session the executor does not hold. A later `startTurn` with the same
   * id starts a new conversation.
   */
  closeAgentSession(
    sessionId: string,
    options: CloseAgentSessionOptions = {},
  ): Promise<SessionCloseResult> {
    return this.#agent((agent) => agent.closeAgentSession(this, sessionId, options));
  }

  /**
   * Delivers an interaction's answer (`interaction.response`), resent with the same
   * `interaction_id` until the executor answers. The first answer wins: a repeat or an unknown
   * interaction resolves `accepted: false`.
   */
  respondInteraction(
    params: InteractionResponseParams,
    options: CallOptions = {},
  ): Promise<InteractionResponseResult> {
    return this.#agent((agent) => agent.respondInteraction(this, params, options));
  }

  /**
   * Delivers the result of a custom tool call (`agent.custom_tool_result`), resent until the
   * executor answers; only the first result per `tool_use_id` counts. Rejects with
   * `CapabilityNotAdvertisedError` (nothing sent) unless the executor declared
   * `agent.custom_tools`.
   */
  sendCustomToolResult(
    params: AgentCustomToolResultParams,
    options: CallOptions = {},
  ): Promise<CustomToolResultResult> {
    return this.#agent((agent) => agent.sendCustomToolResult(this, params, options));
  }

  #agent<T>(fn: (agent: AgentHost) => Promise<T>): Promise<T> {
    const agent = this.#ctx.agent;
    if (!agent) return Promise.reject(new NoAgentPlatformError());
    return fn(agent);
  }

  #addSession(session: Session): void {
    const id = session.id;
    const sessions = this.#sessions ??= new Map();
    sessions.set(id, session);
    this.#ctx.sessions.set(id, session);
    session.ended.then(() => {
      if (sessions.get(id) === session) sessions.delete(id);
    });
  }

  #openAgentSession(id: string): Session {
    const existing = this.#sessions?.get(id);
    if (existing && existing.state !== "ended") return existing;
    const other = this.#ctx.sessions.get(id);
    if (other && other.executor !== this) throw new SessionRefusedError(id, "session_exists");
    const session = new Session(
      this,
      { session_id: id, metadata: { source: "harness" } },
      this.#control,
      this.#ctx,
    );
    this.#addSession(session);
    // Opened by its first turn: there is no session.assign or session.ready to wait for.
    const control = sessionControl(session);
    control.markAssigned();
    control.markReady();
    return session;
  }

  #withTimeout(options: CallOptions): CallOptions {
    const timeoutMs = this.#ctx.requestTimeoutMs;
    return timeoutMs === undefined || options.timeoutMs !== undefined
      ? options
      : { ...options, timeoutMs };
  }

  #attach(connection: ExecutorConnection, params: ExecutorRegisterParams): string[] {
    const previous = this.#connection;
    this.#connection = connection;
    this.#register = params;
    this.#capabilities = params.capabilities;
    connection.peer.capabilities = params.capabilities;
    if (previous && previous !== connection) {
      this.#ctx.logger.info("executor replaced by a new registration", { executor_id: this.id });
      previous.replaced();
    }
    if (params.resume?.executor_id !== this.id) this.#epoch++;
    const wanted = params.resume?.executor_id === this.id
      ? new Set(params.resume.active_sessions)
      : new Set<string>();
    const resumed: string[] = [];
    for (const session of [...(this.#sessions?.values() ?? [])]) {
      if (wanted.has(session.id)) resumed.push(session.id);
      else sessionControl(session).end("lost", "session_lost");
    }
    this.#lease.renew();
    // Calls that could not be sent, or whose ack was lost, go out again once the executor has
    // its register result; it deduplicates them by tool_call_id.
    afterReply(() => {
      if (this.#connection !== connection) return;
      // Lossy output (terminal.output) sent while disconnected is read back.
      for (const id of resumed) {
        const session = this.#sessions?.get(id);
        if (session) sessionControl(session).resumed();
      }
      for (const entry of this.#ctx.ledger.pending((e) => e.executorId === this.id)) {
        const unsent = entry.state === "queued" ||
          (entry.state === "dispatching" && entry.dispatchedOn !== connection);
        if (unsent) this.#dispatch(entry);
      }
    });
    return resumed;
  }

  #detach(connection: ExecutorConnection, forGood: boolean): void {
    if (this.#connection !== connection) return;
    this.#connection = undefined;
    const channels = this.#channels;
    this.#channels = undefined;
    for (const channel of [...(channels?.values() ?? [])]) {
      // The server may live on with the session, but messages in flight are lost: the MCP
      // client sees the channel end and opens a new one after the executor is back.
      mcpChannelControl(channel).end("disconnected");
    }
    if (forGood) {
      this.#release("closed");
      return;
    }
    this.#ctx.emit({ type: "disconnected", executor: this });
  }

  #dispatch(entry: ToolCallEntry): void {
    const connection = this.#connection;
    if (!connection || entry.state === "settled") {
      if (entry.state !== "settled") entry.state = "queued";
      return;
    }
    entry.state = "dispatching";
    entry.dispatchedOn = connection;
    // The params were checked when the call was made (session.callTool).
    connection.peer.call("tool.call", entry.params, this.#withTimeout({ prevalidated: true })).then(
      () => {
        if (entry.state === "dispatching" && entry.dispatchedOn === connection) {
          entry.state = "dispatched";
        }
      },
      (error) => {
        // Settled meanwhile, or already sent again on a newer connection: nothing to do.
        if (entry.state === "settled" || entry.dispatchedOn !== connection) return;
        if (error instanceof ConnectionClosedError) {
          // Sent again after the executor reconnects within its lease.
          entry.state = "queued";
          return;
        }
        // A protocol error means the executor refused the call: it never ran.
        this.#ctx.ledger.fail(
          entry,
          error instanceof ProtocolError
            ? error
            : new ToolOutcomeUnknownError(entry.id, entry.sessionId, "dispatch_failed", {
              cause: error,
            }),
        );
      },
    );
  }

  async #openMcp(session: Session, server: string): Promise<McpChannel> {
    const { channel_id } = await this.request("mcp.open", { session_id: session.id, server });
    const connection = this.#connection;
    const channel = new McpChannel(channel_id, server, session.id, {
      send: (message) => {
        if (!this.#connection || this.#connection !== connection) {
          throw new ExecutorUnavailableError(this.id, this.#gone ? "gone" : "disconnected");
        }
        this.#connection.peer.notify("mcp.message", { channel_id, message });
      },
      close: async (reason) => {
        this.#channels?.delete(channel_id);
        sessionControl(session).channels.delete(channel_id);
        if (this.#connection !== connection || !connection) return;
        try {
          await connection.peer.call("mcp.close", {
            channel_id,
            session_id: session.id,
            reason,
          }, this.#withTimeout({}));
        } catch (error) {
          this.#ctx.logger.debug("mcp.close failed", { channel_id, error: String(error) });
        }
      },
    });
    if (session.state === "ended" || !connection) {
      mcpChannelControl(channel).end(session.state === "ended" ? "session_ended" : "disconnected");
      return channel;
    }
    (this.#channels ??= new Map()).set(channel_id, channel);
    sessionControl(session).channels.set(channel_id, channel);
    channel.closed.then(() => {
      if (this.#channels?.get(channel_id) === channel) this.#channels.delete(channel_id);
      sessionControl(session).channels.delete(channel_id);
    });
    return channel;
  }

  #expire(): void {
    this.#ctx.logger.warn("executor lease expired", { executor_id: this.id });
    const connection = this.#connection;
    this.#release("lease_expired");
    connection?.peer.close(CloseCode.LEASE_EXPIRED, "lease expired");
  }

  #release(reason: ExecutorGoneReason): void {
    if (this.#gone) return;
    this.#gone = reason;
    this.#lease.end();
    this.#connection = undefined;
    const toolReason: ToolOutcomeUnknownReason = reason === "closed" ? "executor_closed" : reason;
    for (const session of [...(this.#sessions?.values() ?? [])]) {
      sessionControl(session).end(reason, toolReason);
    }
    for (const entry of this.#ctx.ledger.pending((e) => e.executorId === this.id)) {
      this.#ctx.ledger.fail(
        entry,
        new ToolOutcomeUnknownError(entry.id, entry.sessionId, toolReason),
      );
    }
    const channels = this.#channels;
    this.#channels = undefined;
    for (const channel of [...(channels?.values() ?? [])]) mcpChannelControl(channel).end(reason);
    this.#ctx.forget(this);
    this.#ctx.logger.info("executor gone", { executor_id: this.id, reason });
    this.#ctx.emit({ type: "gone", executor: this });
    this.#resolveClosed?.({ reason });
    this.#resolveClosed = undefined;
  }
}
