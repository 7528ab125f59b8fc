/**
 * A session assigned to an executor, seen from the harness: wait for it to be ready, call its
 * tools, read its durable events, open MCP channels to its servers, stop it.
 */
import type { CallOptions } from "../protocol/peer.ts";
import {
  CapabilityNotAdvertisedError,
  InvalidOutgoingParamsError,
  InvalidResultError,
  RequestAbortedError,
} from "../protocol/errors.ts";
import { servesTool } from "../protocol/capabilities.ts";
import {
  type Capabilities,
  type HarnessRequestMethod,
  isToolCallParams,
  METHOD_SPECS,
  type RequestMap,
  type SessionAssignParams,
  type SessionEventParams,
  type SessionEventResult,
  type SessionMetadata,
  type SessionStatus,
  type SessionStatusParams,
  type TerminalOutputParams,
  TOOL_NAMES,
  TOOL_SPECS,
  type ToolCallParams,
  type ToolCancelResult,
  type ToolMap,
  type ToolName,
  type ToolProgressParams,
} from "../protocol/generated/contract.ts";
import type { JsonRpcId } from "../protocol/jsonrpc.ts";
import type { HarnessContext } from "./context.ts";
import {
  SessionEndedError,
  ToolOutcomeUnknownError,
  type ToolOutcomeUnknownReason,
} from "./errors.ts";
import { EventLog, type SessionEventRecord } from "./event-log.ts";
import { Deadline } from "./lease.ts";
import type { ExecutorHandle } from "./executor-handle.ts";
import { type McpChannel, mcpChannelControl } from "./mcp-channel.ts";
import { randomId } from "./token-endpoint.ts";
import type { ToolCallEntry, ToolCallResult } from "./tool-call-ledger.ts";
import {
  closeOnAbort,
  Terminal,
  type TerminalHost,
  type TerminalOptions,
  TerminalOutput,
} from "./terminal.ts";
import { advertisedInputCheck } from "./tool-input.ts";

/** A tool call as `callTool` takes it; `tool_call_id` is generated when absent. */
export interface ToolCallRequest {
  /** Tool name, e.g. `bash`. */
  tool: string;
  /**
   * Tool input; for built-in tools it must match the tool's input schema, for a tool of the
   * executor's own the input schema it advertised (`capabilities.tool_definitions`).
   */
  input: Record<string, unknown>;
  /** The idempotency key: calling again with the same id returns the same outcome. */
  tool_call_id?: string;
  /** The executor ends the call with outcome `timed_out` after this long. */
  timeout_ms?: number;
}

/** Options of a tool call. */
export interface ToolCallOptions {
  /** Stops waiting (rejects with `RequestAbortedError`) and asks the executor to cancel the call. */
  signal?: AbortSignal;
  /** Receives the call's `tool.progress` notifications (lossy). */
  onProgress?: (progress: ToolProgressParams) => void;
}

/** Options of a typed tool slot's `call`. */
export interface TypedToolCallOptions extends ToolCallOptions {
  /** The idempotency key; generated when absent. */
  tool_call_id?: string;
  /** The executor ends the call with outcome `timed_out` after this long. */
  timeout_ms?: number;
}

/** A typed slot for one built-in tool: `session.tools.bash.call({ command: "ls" })`. */
export interface ToolSlot<N extends ToolName> {
  /** The tool's name. */
  readonly name: N;
  /**
   * Calls the tool. `structured_content` of the result is checked against the tool's result
   * schema (a mismatch rejects with `InvalidResultError`).
   */
  call(
    input: ToolMap[N]["input"],
    options?: TypedToolCallOptions,
  ): Promise<ToolCallResult<ToolMap[N]["result"]>>;
}

/** The typed slots of the built-in tools. */
export type SessionTools = { readonly [N in ToolName]: ToolSlot<N> };

/** Where a session is, as the harness sees it. */
export type SessionState = "assigning" | "assigned" | "ready" | "stopping" | "ended";

/** How a session ended. */
export interface SessionEnd {
  /** `session.ended`'s reason from the executor, or the harness's: `lease_expired`, `lost`, ... */
  readonly reason: string;
}

/** Options of {@linkcode Session.stop}. */
export interface SessionStopOptions {
  /** Time between SIGTERM and SIGKILL on the executor. */
  grace_ms?: number;
  /** Stops waiting for `session.ended` (rejects with `RequestAbortedError`). */
  signal?: AbortSignal;
  /**
   * How long to wait for `session.ended` after the executor accepted the stop; then the harness
   * ends the session on its own (reason `stop_timeout`). Default: `grace_ms` (or 5 s) plus 60 s.
   */
  timeoutMs?: number;
}

/** Waiting for `session.ended` beyond the executor's grace period, by default. */
const STOP_SLACK_MS = 60_000;
const DEFAULT_GRACE_MS = 5_000;

/** What a session needs from its executor (internal). */
export interface SessionHost {
  /** The executor's advertised capabilities (latest). */
  readonly capabilities: Capabilities | undefined;
  /** Sends `tool.call` for an entry now, or queues it until the executor is connected. */
  dispatch(entry: ToolCallEntry): void;
  /** Sends a harness request on the current connection. */
  request<M extends HarnessRequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    options?: CallOptions,
  ): Promise<RequestMap[M]["result"]>;
  /** Opens an MCP channel to a server of the session. */
  openMcp(session: Session, server: string): Promise<McpChannel>;
}

/** The harness-internal controls of a session. */
export interface SessionControl {
  /** `session.ready` arrived; resolves whether it was a repeat. */
  markReady(): boolean;
  /** `session.assign` was acknowledged. */
  markAssigned(): void;
  /** Ends the session; pending tool calls fail with `ToolOutcomeUnknownError(toolReason)`. */
  end(reason: string, toolReason: ToolOutcomeUnknownReason): void;
  /** A `session.status` notification. */
  status(params: SessionStatusParams): void;
  /** A `tool.progress` notification. */
  progress(params: ToolProgressParams): void;
  /** A `session.event` request. */
  appendEvent(
    params: SessionEventParams,
    rpcId: JsonRpcId,
    frameLength: number,
  ): Promise<SessionEventResult>;
  /** The session's open MCP channels, by channel id. */
  readonly channels: Map<string, McpChannel>;
  /** A `terminal.output` notification. */
  terminalOutput(params: TerminalOutputParams): void;
  /** The executor reconnected and resumed the session. */
  resumed(): void;
}

const controls = new WeakMap<Session, SessionControl>();

/** The internal controls of a session (for the harness's own modules). */
export function sessionControl(session: Session): SessionControl {
  return controls.get(session)!;
}

const TOOL_CALL_PARAMS = METHOD_SPECS.get("tool.call")!.params;

/** A session of an executor. */
export class Session {
  /** The session id. */
  readonly id: string;
  /** The executor running it. */
  readonly executor: ExecutorHandle;
  /** The metadata it was assigned with (`source` defaults to `"harness"`: a long-lived session). */
  readonly metadata: SessionMetadata;
  /** Settles when the session has ended (after `session.ended`, or when the harness ended it). */
  readonly ended: Promise<SessionEnd>;
  /** The typed tool slots: `session.tools.bash.call({ command: "ls" })`. */
  readonly tools: SessionTools;

  readonly #host: SessionHost;
  readonly #ctx: HarnessContext;
  readonly #log: EventLog;
  readonly #progress = new Map<string, Set<(progress: ToolProgressParams) => void>>();
  #terminals: Map<string, { terminal: Terminal; output: TerminalOutput }> | undefined;
  #state: SessionState = "assigning";
  #reported: SessionStatusParams | undefined;
  #endReason: string | undefined;
  #resolveEnded!: (end: SessionEnd) => void;
  #readyWaiters: { resolve: () => void; reject: (error: unknown) => void }[] = [];

  /** Internal: sessions are created by `ExecutorHandle.assignSession`. */
  constructor(
    executor: ExecutorHandle,
    params: SessionAssignParams,
    host: SessionHost,
    ctx: HarnessContext,
  ) {
    this.id = params.session_id;
    this.executor = executor;
    this.metadata = params.metadata ?? {};
    this.#host = host;
    this.#ctx = ctx;
    this.ended = new Promise((resolve) => (this.#resolveEnded = resolve));
    const sink = ctx.eventSink;
    this.#log = new EventLog(this.id, { sink, now: () => ctx.clock.now(), ...ctx.eventRetention });
    this.tools = Object.fromEntries(
      TOOL_NAMES.map((name) => [name, this.#slot(name)]),
    ) as unknown as SessionTools;
    const channels = new Map<string, McpChannel>();
    controls.set(this, {
      markReady: () => this.#markReady(),
      markAssigned: () => {
        if (this.#state === "assigning") this.#state = "assigned";
      },
      end: (reason, toolReason) => this.#end(reason, toolReason),
      status: (params) => {
        this.#reported = params;
      },
      progress: (params) => {
        for (const listener of this.#progress.get(params.tool_call_id) ?? []) {
          try {
            listener(params);
          } catch (error) {
            this.#ctx.logger.warn("progress listener failed", { error: String(error) });
          }
        }
      },
      appendEvent: (params, rpcId, frameLength) => this.#log.append(params, rpcId, frameLength),
      channels,
      terminalOutput: (params) => this.#terminals?.get(params.terminal_id)?.output.deliver(params),
      resumed: () => {
        for (const { output } of this.#terminals?.values() ?? []) output.resumed();
      },
    });
  }

  /** Where the session is. */
  get state(): SessionState {
    return this.#state;
  }

  /** The last `session.status` the executor reported, if any. */
  get reportedStatus(): { status: SessionStatus; detail?: string } | undefined {
    const r = this.#reported;
    return r
      ? { status: r.status, ...(r.detail !== undefined ? { detail: r.detail } : {}) }
      : undefined;
  }

  /** Resolves once the executor has reported the session ready (`session.ready`). */
  ready(): Promise<void> {
    if (this.#state === "ready" || this.#state === "stopping") return Promise.resolve();
    if (this.#state === "ended") {
      return Promise.reject(new SessionEndedError(this.id, this.#endReason ?? "ended"));
    }
    return new Promise((resolve, reject) => this.#readyWaiters.push({ resolve, reject }));
  }

  /**
   * Calls a tool and resolves with its outcome once `tool.result` arrives. Idempotent by
   * `tool_call_id`: a repeat returns the same outcome and the tool runs once. Pending calls
   * survive a reconnect within the lease; when the lease expires they reject with
   * `ToolOutcomeUnknownError`. Input that the tool's schema refuses (the contract's for a
   * built-in tool, the advertised one for the executor's own) rejects with
   * `InvalidOutgoingParamsError`, its issue paths into the params (`["input", "city"]`), and
   * nothing is sent.
   */
  callTool(request: ToolCallRequest, options: ToolCallOptions = {}): Promise<ToolCallResult> {
    try {
      return this.#callTool(request, options);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Asks the executor to cancel a running call; the call then ends with outcome `canceled`. */
  cancelTool(toolCallId: string, reason?: string): Promise<ToolCancelResult> {
    if (this.#state === "ended") {
      return Promise.reject(new SessionEndedError(this.id, this.#endReason ?? "ended"));
    }
    return this.#host.request("tool.cancel", {
      tool_call_id: toolCallId,
      session_id: this.id,
      ...(reason !== undefined ? { reason } : {}),
    });
  }

  /**
   * The session's durable events, deduplicated and in order: every event accepted so far, then
   * new ones as they arrive. The iteration ends when the session ends (or `signal` aborts).
   */
  events(
    options: { from?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    return this.#log.read(options);
  }

  /**
   * The events kept in memory, oldest first: the most recent ones, within the harness's
   * `maxSessionEvents` and `maxSessionEventBytes`.
   */
  get eventRecords(): readonly SessionEventRecord[] {
    return this.#log.records;
  }

  /** How many of the session's oldest events were dropped from memory (the sink has them). */
  get droppedEvents(): number {
    return this.#log.dropped;
  }

  /**
   * Opens a channel (`mcp.open`) to the session's MCP server `name` and returns it as a
   * transport the MCP TypeScript SDK's `Client` can `connect` to. Gated by capability `mcp`.
   */
  mcp(name: string): Promise<McpChannel> {
    if (this.#state === "ended") {
      return Promise.reject(new SessionEndedError(this.id, this.#endReason ?? "ended"));
    }
    return this.#host.openMcp(this, name);
  }

  /**
   * Opens a pseudo-terminal on the executor (`terminal.open`, capability `terminal`): the
   * user's login shell unless `argv` says otherwise, 80x24 unless `cols`/`rows` do. Idempotent by
   * `terminal_id` (generated when absent): opening again answers the same terminal. Its output
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
  async terminal(options: TerminalOptions = {}): Promise<Terminal> {
    if (this.#state === "ended") throw new SessionEndedError(this.id, this.#endReason ?? "ended");
    const { signal, terminal_id, ...rest } = options;
    const id = terminal_id ?? randomId("term_");
    const terminals = this.#terminals ??= new Map();
    let known = terminals.get(id);
    const fresh = !known;
    if (!known) {
      // Routed before the request: output may arrive ahead of the answer.
      const host: TerminalHost = {
        sessionId: this.id,
        logger: this.#ctx.logger,
        request: (method, params, callOptions) => this.#host.request(method, params, callOptions),
      };
      const entry = {} as { terminal: Terminal; output: TerminalOutput };
      // Forgotten once its output has ended: no more notifications are needed for it.
      entry.output = new TerminalOutput(id, host, () => {
        if (terminals.get(id) === entry) terminals.delete(id);
      });
      entry.terminal = new Terminal(id, host, entry.output);
      terminals.set(id, known = entry);
    }
    const { terminal, output } = known;
    try {
      const result = await this.#host.request("terminal.open", {
        session_id: this.id,
        terminal_id: id,
        ...rest,
      }, { signal });
      terminal.opened(result);
      // Already open on the executor (a retry, or a handle made anew): read what it holds.
      if (result.duplicate) output.resumed();
    } catch (error) {
      if (fresh) output.end();
      throw error;
    }
    // The session may have ended while terminal.open was in flight.
    if (this.state === "ended") output.end();
    if (signal) closeOnAbort(terminal, signal, this.#ctx.logger);
    return terminal;
  }

  /**
   * Stops the session (`session.stop`): the executor terminates its processes and MCP servers
   * and sends `session.ended`. Resolves after `session.ended`.
   */
  async stop(reason?: string, options: SessionStopOptions = {}): Promise<SessionEnd> {
    if (this.#state === "ended") return { reason: this.#endReason! };
    const result = await this.#host.request("session.stop", {
      session_id: this.id,
      ...(reason !== undefined ? { reason } : {}),
      ...(options.grace_ms !== undefined ? { grace_ms: options.grace_ms } : {}),
    }, { signal: options.signal });
    if (!result.stopping) {
      // The executor no longer holds it: there is no session.ended to wait for.
      this.#end(reason ?? "stopped", "session_ended");
      return { reason: this.#endReason! };
    }
    // session.ended may have arrived while the stop request was in flight.
    if (this.state === "ended") return await this.ended;
    this.#state = "stopping";
    // Every wait ends: an executor that never reports session.ended does not hold the caller.
    const waitMs = options.timeoutMs ?? (options.grace_ms ?? DEFAULT_GRACE_MS) + STOP_SLACK_MS;
    const deadline = new Deadline(this.#ctx.clock, () => {
      this.#ctx.logger.warn("session.ended did not arrive: ending the session", {
        session_id: this.id,
      });
      this.#end("stop_timeout", "session_ended");
    });
    deadline.set(this.#ctx.clock.now() + waitMs);
    this.ended.then(() => deadline.cancel());
    const signal = options.signal;
    if (!signal) return await this.ended;
    return await new Promise<SessionEnd>((resolve, reject) => {
      const onAbort = () => reject(new RequestAbortedError("session.stop", signal.reason));
      if (signal.aborted) onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.ended.then((end) => {
        signal.removeEventListener("abort", onAbort);
        resolve(end);
      });
    });
  }

  #callTool(request: ToolCallRequest, options: ToolCallOptions): Promise<ToolCallResult> {
    if (this.#state === "ended") throw new SessionEndedError(this.id, this.#endReason ?? "ended");
    const ledger = this.#ctx.ledger;
    const id = request.tool_call_id ?? randomId("call_");
    // A fresh random id is in no table: only a caller's own id can name an earlier call.
    let entry = request.tool_call_id === undefined ? undefined : ledger.get(id);
    if (entry && (entry.sessionId !== this.id || entry.executorId !== this.executor.id)) {
      throw new InvalidOutgoingParamsError("tool.call", [{
        path: ["tool_call_id"],
        message: "tool_call_id is in use by another session",
        code: "custom",
      }]);
    }
    if (!entry) {
      // A peer never receives a method for a capability it did not advertise: tool:<name>.
      if (!servesTool(this.#host.capabilities, request.tool)) {
        throw new CapabilityNotAdvertisedError("tool.call", `tool:${request.tool}`);
      }
      const params: ToolCallParams = {
        session_id: this.id,
        tool_call_id: id,
        tool: request.tool,
        input: request.input,
        ...(request.timeout_ms !== undefined ? { timeout_ms: request.timeout_ms } : {}),
      };
      // Checked now, not at dispatch: a call queued for a reconnect must not fail later.
      const checked = isToolCallParams(params) ? undefined : TOOL_CALL_PARAMS.safeParse(params);
      if (checked && !checked.success) {
        throw new InvalidOutgoingParamsError(
          "tool.call",
          checked.error.issues.map((i) => ({
            path: i.path.map(String),
            message: i.message,
            code: i.code,
          })),
        );
      }
      const issues = advertisedInputCheck(
        this.#host.capabilities,
        request.tool,
        this.#ctx.logger,
      )?.(request.input);
      if (issues) throw new InvalidOutgoingParamsError("tool.call", issues);
      entry = ledger.add(params, this.executor.id);
      this.#host.dispatch(entry);
    }
    const found = entry;
    if (options.onProgress && found.state !== "settled") {
      const listeners = this.#progress.get(id) ?? new Set();
      listeners.add(options.onProgress);
      this.#progress.set(id, listeners);
      const forget = () => {
        listeners.delete(options.onProgress!);
        if (listeners.size === 0) this.#progress.delete(id);
      };
      found.outcome.then(forget, forget);
    }
    const signal = options.signal;
    if (!signal) return found.outcome;
    return new Promise<ToolCallResult>((resolve, reject) => {
      const onAbort = () => {
        reject(new RequestAbortedError("tool.call", signal.reason));
        if (found.state !== "settled" && this.#state !== "ended") {
          this.cancelTool(id, "aborted").catch((error) =>
            this.#ctx.logger.debug("tool.cancel after abort failed", { error: String(error) })
          );
        }
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      found.outcome.then(
        (result) => {
          signal.removeEventListener("abort", onAbort);
          resolve(result);
        },
        (error) => {
          signal.removeEventListener("abort", onAbort);
          reject(error);
        },
      );
    });
  }

  #slot<N extends ToolName>(name: N): ToolSlot<N> {
    const spec = TOOL_SPECS.get(name)!;
    return {
      name,
      call: async (input, options = {}) => {
        const { tool_call_id, timeout_ms, ...callOptions } = options;
        const result = await this.callTool({
          tool: name,
          input: input as unknown as Record<string, unknown>,
          ...(tool_call_id !== undefined ? { tool_call_id } : {}),
          ...(timeout_ms !== undefined ? { timeout_ms } : {}),
        }, callOptions);
        if (result.structured_content !== undefined && spec.result) {
          const checked = spec.result.safeParse(result.structured_content);
          if (!checked.success) {
            throw new InvalidResultError(
              "tool.result",
              checked.error.issues.map((i) => ({
                path: ["structured_content", ...i.path.map(String)],
                message: i.message,
                code: i.code,
              })),
            );
          }
        }
        return result as unknown as ToolCallResult<ToolMap[N]["result"]>;
      },
    };
  }

  #markReady(): boolean {
    if (this.#state === "ready" || this.#state === "stopping" || this.#state === "ended") {
      return true;
    }
    this.#state = "ready";
    for (const waiter of this.#readyWaiters.splice(0)) waiter.resolve();
    return false;
  }

  #end(reason: string, toolReason: ToolOutcomeUnknownReason): void {
    if (this.#state === "ended") return;
    this.#state = "ended";
    this.#endReason = reason;
    this.#log.close();
    const ledger = this.#ctx.ledger;
    for (const entry of ledger.pending((e) => e.sessionId === this.id)) {
      ledger.fail(entry, new ToolOutcomeUnknownError(entry.id, this.id, toolReason));
    }
    const control = controls.get(this)!;
    for (const channel of [...control.channels.values()]) mcpChannelControl(channel).end(reason);
    control.channels.clear();
    for (const { output } of this.#terminals?.values() ?? []) output.end();
    this.#terminals = undefined;
    for (const waiter of this.#readyWaiters.splice(0)) {
      waiter.reject(new SessionEndedError(this.id, reason));
    }
    if (this.#ctx.sessions.get(this.id) === this) this.#ctx.sessions.delete(this.id);
    this.#resolveEnded({ reason });
  }
}
