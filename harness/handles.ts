/**
 * The brain's views of the harness's executors and sessions: {@linkcode ExecutorHandle} and
 * {@linkcode Session}, what the harness tells of its executors ({@linkcode ExecutorEvent}), and
 * what an agent capability does with a handle ({@linkcode AgentOps}).
 *
 * A handle is a view: it reads its entry (the state behind it: `ExecutorEntry`, `SessionEntry`
 * of state.ts, in the shapes of handle-entries.ts) and hands every operation to the harness's
 * services (handle-services.ts, given to its constructor), which own the rules. What the
 * operations take is in handle-options.ts, the typed tool slots in tool-slots.ts.
 *
 * @module
 */
import { CALL_TOOL_REQUEST_FIELDS, refuseOptions } from "./option-spelling.ts";
import type { CallOptions } from "../protocol/peer.ts";
import { aborted, raceSignal } from "../protocol/abort.ts";
import { LocalError } from "../protocol/errors.ts";
import type {
  Ack,
  AgentCustomToolResultParams,
  Capabilities,
  CustomToolResultResult,
  ExecutorDrainParams,
  ExecutorDrainResult,
  ExecutorInfo,
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
  SessionMetadata,
  SessionStatus,
  ToolCancelResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnStartParams,
  TurnStartResult,
} from "../protocol/generated/contract.ts";
import { NoAgentPlatformError } from "./errors.ts";
import type { ExecutorEntryShape, SessionEntryShape } from "./handle-entries.ts";
import type {
  CloseAgentSessionOptions,
  MountOptions,
  SessionEventsOptions,
  SessionStopOptions,
  ToolCallOptions,
  ToolCallRequest,
  TracedCallOptions,
  TurnInputRequest,
} from "./handle-options.ts";
import type { HarnessServices } from "./handle-services.ts";
import type { ExecutorEnd, ExecutorGoneReason, SessionEnd, SessionState } from "./lifecycle.ts";
import type { McpChannel } from "./mcp-channel.ts";
import type { Principal } from "./principal.ts";
import type { SessionEventRecord, ToolCallResult } from "./records.ts";
import type { Terminal, TerminalOptions } from "./terminal.ts";
import { type SessionTools, toolSlots } from "./tool-slots.ts";

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
  /** What happened. */
  readonly type: ExecutorEventType;
  /** The executor. */
  readonly executor: ExecutorHandle;
  /** `gone`: why. */
  readonly reason?: ExecutorGoneReason;
}

/**
 * The agent capability's harness → executor operations, as an agent capability implements
 * them (`AgentCapability.attach` returns them with the rest of its hooks).
 */
export interface AgentOps {
  /** `executor.startTurn`. */
  startTurn(
    executor: ExecutorHandle,
    params: TurnStartParams,
    options: CallOptions,
  ): Promise<TurnStartResult>;
  /** `executor.sendTurnInput`. */
  sendTurnInput(
    executor: ExecutorHandle,
    params: TurnInputRequest,
    options: CallOptions,
  ): Promise<Ack>;
  /** `executor.cancelTurn`. */
  cancelTurn(
    executor: ExecutorHandle,
    params: TurnCancelParams,
    options: CallOptions,
  ): Promise<TurnCancelResult>;
  /** `executor.closeAgentSession`. */
  closeAgentSession(
    executor: ExecutorHandle,
    sessionId: string,
    options: CloseAgentSessionOptions,
  ): Promise<SessionCloseResult>;
  /** `executor.respondInteraction`. */
  respondInteraction(
    executor: ExecutorHandle,
    params: InteractionResponseParams,
    options: CallOptions,
  ): Promise<InteractionResponseResult>;
  /** `executor.sendCustomToolResult`. */
  sendCustomToolResult(
    executor: ExecutorHandle,
    params: AgentCustomToolResultParams,
    options: CallOptions,
  ): Promise<CustomToolResultResult>;
}

/** An executor's entry, as its handle reads it (internal). */
type ExecutorShape = ExecutorEntryShape<ExecutorHandle, Session>;

/** A session's entry, as its view reads it (internal). */
type SessionShape = SessionEntryShape<ExecutorHandle, Session>;

/** What a handle hands its operations to: the harness's services (internal). */
export type HandleServices = HarnessServices<ExecutorShape, SessionShape, AgentOps>;

/** An executor registered with the harness. */
export class ExecutorHandle {
  /** The executor id (`exec_<machine_id>` for a machine credential). */
  readonly id: string;
  readonly #entry: ExecutorShape;
  readonly #services: HandleServices;

  /** Handles are made by the harness when executors register (or when it recovers them). */
  constructor(entry: ExecutorShape, services: HandleServices) {
    this.id = entry.id;
    this.#entry = entry;
    this.#services = services;
  }

  /** Settles when the executor is gone for good. */
  get closed(): Promise<ExecutorEnd> {
    return this.#entry.closed;
  }

  /** The negotiated protocol version of the current (or last) connection. */
  get protocol(): ProtocolVersion {
    return this.#entry.register.protocol;
  }

  /** What the executor is (name, os, arch, version). */
  get info(): ExecutorInfo {
    return this.#entry.register.executor;
  }

  /** The capabilities it advertises (latest `executor.register` or `executor.capabilities.update`). */
  get capabilities(): Capabilities {
    return this.#entry.capabilities;
  }

  /** Its environment id; `""` for a machine-scoped executor. */
  get environmentId(): string {
    return this.#entry.register.environment_id;
  }

  /** Its machine id, when it sent one. */
  get machineId(): string | undefined {
    return this.#entry.register.machine_id ?? this.#entry.principal.machineId;
  }

  /** Most sessions it accepts at once, when it said. */
  get maxSessions(): number | undefined {
    return this.#entry.register.max_sessions;
  }

  /** What `authenticate` established about its credential. */
  get principal(): Principal {
    return this.#entry.principal;
  }

  /** Whether a registered connection is open right now. */
  get connected(): boolean {
    return this.#entry.connection !== undefined;
  }

  /** Whether it was asked to drain (no new sessions). */
  get draining(): boolean {
    return this.#entry.draining;
  }

  /** Whether it is gone for good. */
  get gone(): boolean {
    return this.#entry.gone !== undefined;
  }

  /** When the lease expires without a further heartbeat (ms since the epoch). */
  get leaseExpiresAt(): number | undefined {
    return this.#entry.lease?.expiresAt;
  }

  /** Its live sessions, by id. */
  get sessions(): ReadonlyMap<string, Session> {
    const out = new Map<string, Session>();
    for (const [id, session] of this.#entry.sessions ?? []) out.set(id, session.view);
    return out;
  }

  /**
   * Assigns a session (`session.assign`). `metadata.source` defaults to `"harness"` (a
   * long-lived session; any other source is one-shot). A refusal by the executor rejects with
   * its typed error (-32009 `ResourceExhaustedError`, -32012 `CapabilityMissingError`,
   * -32004 `UnavailableError`); a local refusal with `SessionRefusedError`.
   */
  assignSession(params: SessionAssignParams, options: TracedCallOptions = {}): Promise<Session> {
    return this.#services.sessions.assign(this.#entry, params, options);
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
    const serviceUrl = options.serviceUrl ?? this.#services.executors.fileServiceUrl;
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
    return this.#services.executors.drain(this.#entry, params, options);
  }

  /**
   * Sends a harness request to the executor, typed by the contract (`process.start`,
   * `terminal.open`, `skill.install`, ...). Rejects with `CapabilityNotAdvertisedError` for a
   * capability it did not advertise. A request a repeat of which does what it would (a read, a
   * wait, a start naming its own id: see the README) waits while the executor is away within its
   * lease and is sent again once it is back; any other rejects with `ConnectionClosedError` when
   * its connection is lost, `ExecutorUnavailableError` while the executor is not connected.
   */
  request<M extends HarnessRequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    options: TracedCallOptions = {},
  ): Promise<RequestMap[M]["result"]> {
    return this.#services.executors.request(this.#entry, method, params, options);
  }

  /** Sends a harness notification (`executor.close`, `mcp.message`). */
  notify<M extends HarnessNotificationMethod>(method: M, params: NotificationMap[M]): void {
    this.#services.executors.notify(this.#entry, method, params);
  }

  /**
   * Closes the executor for good: `executor.close`, then close code 1000. Its sessions end and
   * pending tool calls fail with `ToolOutcomeUnknownError`. Resolves once the connection has
   * closed; `signal` stops that wait (rejects with `RequestAbortedError`), the close goes on,
   * and an already-aborted one closes nothing.
   */
  close(reason = "closed", options: { signal?: AbortSignal } = {}): Promise<void> {
    const signal = options.signal;
    return aborted(signal, "executor.close") ??
      raceSignal(this.#services.executors.close(this.#entry, reason), signal, "executor.close");
  }

  // ---- the agent capability (needs `new Harness({ agent })`) ---------------------------------

  /**
   * Starts an agent turn (`turn.start`): opens the session on this executor on first use (no
   * `assignSession`) or continues it; pass `executor_session_ref` from an earlier result to let
   * a restarted executor resume its conversation. Idempotent by `turn_id` (resent after a
   * reconnect within the lease; a repeat of a turn that ended, or whose session did, answers
   * `duplicate: true` without being sent again). Refusals reject with the executor's typed
   * error: -32013 `ConflictError` (a turn is running: use `sendTurnInput`), -32009
   * `ResourceExhaustedError` (beyond `agent.max_sessions`), -32004 `UnavailableError`
   * (draining); and the harness's `SessionRefusedError` `session_exists` for the id of a session
   * that ended and that its store still remembers (its events stay readable under it: continue
   * under a new session id with `executor_session_ref`).
   */
  startTurn(params: TurnStartParams, options: TracedCallOptions = {}): Promise<TurnStartResult> {
    return this.#agent((agent) =>
      this.#services.executors.traced(
        this.#entry,
        "turn.start",
        params,
        options,
        (traced, rest) => agent.startTurn(this, traced, rest),
      )
    );
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
   * id starts a new conversation on a harness without a store; with one, whose records keep the
   * ended session readable, it is refused (`SessionRefusedError` `session_exists`): use a new id.
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

  #agent<T>(fn: (agent: AgentOps) => Promise<T>): Promise<T> {
    const agent = this.#services.agent;
    if (!agent) return Promise.reject(new NoAgentPlatformError());
    return fn(agent);
  }
}

/** A session of an executor. */
export class Session {
  /** The session id. */
  readonly id: string;
  /** The metadata it was assigned with (`source` defaults to `"harness"`: a long-lived session). */
  readonly metadata: SessionMetadata;
  /** Settles when the session has ended (after `session.ended`, or when the harness ended it). */
  readonly ended: Promise<SessionEnd>;
  /** The typed tool slots: `session.tools.bash.call({ command: "ls" })`. */
  readonly tools: SessionTools;
  readonly #entry: SessionShape;
  readonly #services: HandleServices;

  /** Sessions are made by the harness (`assignSession`, an agent's first turn, a recovery). */
  constructor(entry: SessionShape, services: HandleServices) {
    this.id = entry.id;
    this.metadata = entry.metadata;
    this.ended = entry.ended;
    this.#entry = entry;
    this.#services = services;
    this.tools = toolSlots((request, options) => this.callTool(request, options));
  }

  /** The executor running it. */
  get executor(): ExecutorHandle {
    return this.#entry.executor.handle;
  }

  /** Where the session is. */
  get state(): SessionState {
    return this.#entry.state;
  }

  /** The last `session.status` the executor reported, if any. */
  get reportedStatus(): { status: SessionStatus; detail?: string } | undefined {
    const r = this.#entry.reported;
    return r
      ? { status: r.status, ...(r.detail !== undefined ? { detail: r.detail } : {}) }
      : undefined;
  }

  /**
   * Resolves once the executor has reported the session ready (`session.ready`); rejects with
   * `SessionEndedError` when it ends first. `signal` stops waiting (rejects with
   * `RequestAbortedError`).
   */
  ready(options: { signal?: AbortSignal } = {}): Promise<void> {
    return this.#services.sessions.ready(this.#entry, options.signal);
  }

  /**
   * Calls a tool and resolves with its outcome once `tool.result` arrives. Idempotent by
   * `tool_call_id`: a repeat returns the same outcome and the tool runs once — also after the
   * harness restarted on the same store, with the result recorded before or after the restart.
   * Pending calls survive a reconnect within the lease; when the lease expires they reject with
   * `ToolOutcomeUnknownError`. Input that the tool's schema refuses (the contract's for a
   * built-in tool, the advertised one for the executor's own) rejects with
   * `InvalidOutgoingParamsError`, its issue paths into the params (`["input", "city"]`), and
   * nothing is sent.
   */
  callTool(request: ToolCallRequest, options: ToolCallOptions = {}): Promise<ToolCallResult> {
    try {
      refuseOptions("callTool", options, CALL_TOOL_REQUEST_FIELDS);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#services.calls.callTool(this.#entry, request, options);
  }

  /**
   * Asks the executor to cancel a running call (`tool.cancel`); the call then ends with outcome
   * `canceled`. `options.signal` aborts the request (rejects with `RequestAbortedError`).
   */
  cancelTool(
    toolCallId: string,
    reason?: string,
    options: CallOptions = {},
  ): Promise<ToolCancelResult> {
    return this.#services.calls.cancelTool(this.#entry, toolCallId, reason, options);
  }

  /**
   * The session's durable events, deduplicated and in order: every event kept so far from
   * position `from` (0-based; default 0), then new ones as they arrive. The iteration ends when
   * the session ends (or `signal` aborts). A consumer that counts the records it has taken can
   * continue where it stopped with `from`, also after the harness restarted on the same store.
   */
  events(
    options: SessionEventsOptions = {},
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    return this.#services.sessions.events(this.#entry, options);
  }

  /**
   * The events kept, oldest first: the most recent ones, within the harness's
   * `maxSessionEvents` and `maxSessionEventBytes`.
   */
  get eventRecords(): readonly SessionEventRecord[] {
    return this.#entry.log.records;
  }

  /** How many of the session's oldest events were dropped from the log (the sink has them). */
  get droppedEvents(): number {
    return this.#entry.log.dropped;
  }

  /**
   * Opens a channel (`mcp.open`) to the session's MCP server `name` and returns it as a
   * transport the MCP TypeScript SDK's `Client` can `connect` to. Gated by capability `mcp`.
   * `options.signal` aborts `mcp.open` (rejects with `RequestAbortedError`); a channel the
   * executor opened meanwhile ends with the session.
   */
  mcp(name: string, options: CallOptions = {}): Promise<McpChannel> {
    return this.#services.sessions.mcp(this.#entry, name, options);
  }

  /**
   * Opens a pseudo-terminal on the executor (`terminal.open`, capability `terminal`): the
   * user's login shell unless `argv` says otherwise, 80x24 unless `cols`/`rows` do. Idempotent by
   * `terminalId` (generated when absent): opening again answers the same terminal. Its output
   * survives reconnects within the lease, each byte once and in order, while the executor still
   * holds it; the terminal ends with the session.
   *
   * ```ts
   * const terminal = await session.terminal({ cols: 120, rows: 40 });
   * await terminal.write("echo hello; exit\r");
   * for await (const text of terminal) process.stdout.write(text);
   * console.log("exit code", await terminal.exited);
   * ```
   */
  terminal(options: TerminalOptions = {}): Promise<Terminal> {
    return this.#services.sessions.terminal(this.#entry, options);
  }

  /**
   * Stops the session (`session.stop`): the executor terminates its processes and MCP servers
   * and sends `session.ended`. Resolves after `session.ended`.
   */
  stop(reason?: string, options: SessionStopOptions = {}): Promise<SessionEnd> {
    return this.#services.sessions.stop(this.#entry, reason, options);
  }

  /** Stops the session as {@linkcode stop} does: `await using session = await …assignSession(…)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
