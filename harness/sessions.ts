/**
 * Sessions, harness side: assignment (`session.assign`), readiness, status, durable events,
 * MCP channels, terminals, stop, and the end — by `session.ended`, by the executor's lease, or
 * by a reconnect that did not resume it. Each state change is written to the store (`ready`
 * before its ack), so a harness started again on the store holds the same live sessions.
 *
 * Ended sessions are remembered in the store (their record and events) until `rememberEnded`
 * newer ones have ended.
 */
import type { CallOptions } from "../protocol/peer.ts";
import { RequestAbortedError } from "../protocol/errors.ts";
import type {
  Ack,
  SessionAssignParams,
  SessionEventParams,
  SessionEventResult,
  SessionMetadata,
  SessionStatusParams,
  TerminalOutputParams,
} from "../protocol/generated/contract.ts";
import type { Clock } from "../protocol/clock.ts";
import type { JsonRpcId } from "../protocol/jsonrpc.ts";
import type { Logger } from "../protocol/logger.ts";
import { randomId } from "../protocol/ids.ts";
import { SessionRefusedError, type ToolOutcomeUnknownReason } from "./errors.ts";
import { EventLog, type SessionEventSink } from "./event-log.ts";
import {
  ExecutorEntry,
  type HarnessServices,
  type Session,
  sessionEnded,
  SessionEntry,
  type SessionEventsOptions,
  type SessionOps,
  type SessionState,
  type SessionStopOptions,
} from "./handles.ts";
import { then } from "./maybe.ts";
import { type McpChannel, McpChannelState } from "./mcp-channel.ts";
import type { Observers } from "./observe.ts";
import {
  keys,
  type SessionEventRecord,
  type SessionRecord,
  type StoredRegistration,
} from "./records.ts";
import { CallbackDeadline, type Scheduler } from "./scheduler.ts";
import { request, unavailable, withTimeout } from "./send.ts";
import {
  type HarnessStore,
  isPromiseLike,
  type MaybePromise,
  type StoreOp,
} from "./store/store.ts";
import {
  closeOnAbort,
  Terminal,
  type TerminalHost,
  type TerminalOptions,
  TerminalOutput,
} from "./terminal.ts";
import type { ToolCalls } from "./tool-calls.ts";
import { storeUnavailable } from "./tool-call-ledger.ts";

/** Waiting for `session.ended` beyond the executor's grace period, by default. */
const STOP_SLACK_MS = 60_000;
const DEFAULT_GRACE_MS = 5_000;

/** The default number of ended sessions remembered in the store: 1,000. */
export const DEFAULT_REMEMBER_ENDED_SESSIONS = 1_000;

/** What becomes of an ended session's records. */
export type EndRecord =
  /** Written: ended, remembered (its events and results stay readable). */
  | "record"
  /** Nothing written (the harness closes: the next one on the store takes the session up). */
  | "skip"
  /** Deleted: it never started (the executor refused it). */
  | "forget";

/** What the sessions need from the harness. */
export interface SessionsDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly scheduler: Scheduler;
  readonly observers: Observers;
  readonly calls: ToolCalls;
  readonly services: HarnessServices;
  readonly requestTimeoutMs: number | undefined;
  /** Where accepted events go besides the store (the user's sink, the agent capability). */
  readonly eventSink: SessionEventSink | undefined;
  readonly maxSessionEvents: number | undefined;
  readonly maxSessionEventBytes: number | undefined;
  /** Ended sessions remembered in the store. */
  readonly rememberEnded: number;
}

/** The harness's sessions. */
export class Sessions implements SessionOps {
  /** Every live session of the harness, by id (ids are unique across executors). */
  readonly live = new Map<string, SessionEntry>();
  readonly #deps: SessionsDeps;
  /** How many ended sessions the store remembers (counted at recovery). */
  #endedCount = 0;

  constructor(deps: SessionsDeps) {
    this.#deps = deps;
  }

  // ---- creation --------------------------------------------------------------------------------

  async assign(
    executor: ExecutorEntry,
    params: SessionAssignParams,
    options: CallOptions,
  ): Promise<Session> {
    const id = params.session_id;
    if (executor.gone || !executor.connection) {
      throw new SessionRefusedError(id, "executor_unavailable");
    }
    if (executor.draining) throw new SessionRefusedError(id, "draining");
    const assign: SessionAssignParams = {
      ...params,
      metadata: { source: "harness", ...params.metadata },
    };
    const existing = this.live.get(id);
    if (existing && existing.executor !== executor) {
      throw new SessionRefusedError(id, "session_exists");
    }
    if (existing) {
      // A repeat for a session the executor holds is accepted again (retry after a reconnect,
      // or a restart of the harness).
      await request(executor, "session.assign", assign, options, this.#deps.requestTimeoutMs);
      return existing.view;
    }
    // Held before the request: session.ready may arrive right behind the ack.
    const session = this.#create(executor, id, assign.metadata ?? {}, "assigning", false);
    try {
      await this.#write(session);
    } catch (error) {
      this.end(session, "refused", "session_ended", "skip");
      throw error;
    }
    try {
      await request(executor, "session.assign", assign, options, this.#deps.requestTimeoutMs);
    } catch (error) {
      this.end(session, "refused", "session_ended", "forget");
      throw error;
    }
    if (session.state === "assigning") this.#transition(session, "assigned");
    return session.view;
  }

  /**
   * The live session `id` of `executor`, or a new one opened by an agent turn (there is no
   * `session.assign` or `session.ready` to wait for).
   */
  open(executor: ExecutorEntry, id: string): SessionEntry {
    const existing = executor.sessions?.get(id);
    if (existing && existing.state !== "ended") return existing;
    const other = this.live.get(id);
    if (other && other.executor !== executor) throw new SessionRefusedError(id, "session_exists");
    const session = this.#create(executor, id, { source: "harness" }, "ready", true);
    this.#safely(() => this.#write(session));
    return session;
  }

  #create(
    executor: ExecutorEntry,
    id: string,
    metadata: SessionMetadata,
    state: SessionState,
    agent: boolean,
    reopened = false,
  ): SessionEntry {
    const session = new SessionEntry(
      id,
      executor,
      metadata,
      state,
      agent,
      this.#log(id, executor, reopened),
      this.#deps.services,
    );
    (executor.sessions ??= new Map()).set(id, session);
    this.live.set(id, session);
    if (!reopened) this.#observeState(session);
    return session;
  }

  #log(id: string, executor: ExecutorEntry, reopened: boolean): EventLog {
    const deps = this.#deps;
    const observers = deps.observers;
    const options = {
      sink: deps.eventSink,
      now: () => deps.clock.now(),
      ...(deps.maxSessionEvents !== undefined ? { maxRecords: deps.maxSessionEvents } : {}),
      ...(deps.maxSessionEventBytes !== undefined ? { maxBytes: deps.maxSessionEventBytes } : {}),
      ...(deps.store ? { store: deps.store } : {}),
      onAccepted: (record: SessionEventRecord) => {
        if (!observers.active) return;
        observers.emit({
          type: "session.event",
          at: record.received_at,
          sessionId: id,
          executorId: executor.id,
          record,
        });
      },
    };
    return reopened && deps.store
      ? EventLog.reopened(id, { ...options, store: deps.store })
      : new EventLog(id, options);
  }

  // ---- state -----------------------------------------------------------------------------------

  ready(session: SessionEntry): Promise<void> {
    if (session.state === "ready" || session.state === "stopping") return Promise.resolve();
    if (session.state === "ended") return Promise.reject(sessionEnded(session));
    return new Promise((resolve, reject) =>
      (session.readyWaiters ??= []).push({ resolve, reject })
    );
  }

  /** `session.ready` arrived: written before the ack; whether it was a repeat. */
  markReady(session: SessionEntry): MaybePromise<boolean> {
    if (session.state === "ready" || session.state === "stopping" || session.state === "ended") {
      return true;
    }
    session.state = "ready";
    let written: MaybePromise<void>;
    try {
      written = this.#write(session);
    } catch {
      // Not recorded, so not acknowledged: the executor sends session.ready again.
      session.state = "assigned";
      throw storeUnavailable("session");
    }
    const done = () => {
      for (const waiter of session.readyWaiters?.splice(0) ?? []) waiter.resolve();
      this.#observeState(session);
      return false;
    };
    if (!isPromiseLike(written)) return done();
    return Promise.resolve(written).then(done, () => {
      if (session.state === "ready") session.state = "assigned";
      return Promise.reject(storeUnavailable("session"));
    });
  }

  /** A `session.status` notification. */
  status(session: SessionEntry, params: SessionStatusParams): void {
    session.reported = params;
  }

  /** A `session.event` request: stored before the ack is returned. */
  appendEvent(
    session: SessionEntry,
    params: SessionEventParams,
    rpcId: JsonRpcId,
    frameLength: number,
  ): MaybePromise<SessionEventResult> {
    return session.log.append(params, rpcId, frameLength);
  }

  events(
    session: SessionEntry,
    options: SessionEventsOptions,
  ): AsyncGenerator<SessionEventRecord, void, undefined> {
    return session.log.read(options);
  }

  /** `session.ended` from the executor. */
  executorEnded(executor: ExecutorEntry, sessionId: string, reason: string | undefined): Ack {
    const session = executor.sessions?.get(sessionId);
    // A repeat, or a session the harness no longer knows, ends the executor's retry loop.
    if (!session || session.state === "ended") return { ok: true, duplicate: true };
    this.end(session, reason ?? "ended", "session_ended");
    return { ok: true };
  }

  /**
   * Stops the session (`session.stop`) and waits for `session.ended` (at most the timeout:
   * then the harness ends it, `stop_timeout`).
   */
  async stop(
    session: SessionEntry,
    reason: string | undefined,
    options: SessionStopOptions,
  ): Promise<{ reason: string }> {
    if (session.state === "ended") return { reason: session.endReason! };
    const result = await request(
      session.executor,
      "session.stop",
      {
        session_id: session.id,
        ...(reason !== undefined ? { reason } : {}),
        ...(options.grace_ms !== undefined ? { grace_ms: options.grace_ms } : {}),
      },
      { signal: options.signal },
      this.#deps.requestTimeoutMs,
    );
    if (!result.stopping) {
      // The executor no longer holds it: there is no session.ended to wait for.
      this.end(session, reason ?? "stopped", "session_ended");
      return { reason: session.endReason! };
    }
    // session.ended may have arrived while the stop request was in flight.
    if (hasEnded(session)) return await session.ended;
    const waitMs = options.timeoutMs ?? (options.grace_ms ?? DEFAULT_GRACE_MS) + STOP_SLACK_MS;
    this.awaitEnd(session, waitMs, "stop_timeout", "stopping");
    return await this.#ended(session, options.signal, "session.stop");
  }

  /**
   * Waits for `session.ended` after a stop or a close: every wait ends, an executor that never
   * reports it does not hold the caller. Written with the session, so the wait survives a
   * restart of the harness.
   */
  awaitEnd(
    session: SessionEntry,
    waitMs: number,
    reason: string,
    state: SessionState = session.state,
  ): void {
    if (session.state === "ended") return;
    this.#armEnd(session, this.#deps.clock.now() + waitMs, reason);
    if (state !== session.state) {
      session.state = state;
      this.#observeState(session);
    }
    this.#safely(() => this.#write(session));
  }

  #armEnd(session: SessionEntry, at: number, reason: string): void {
    const deadline = session.endDeadline ??= new CallbackDeadline(() => {
      this.#deps.logger.warn("session.ended did not arrive: ending the session", {
        session_id: session.id,
      });
      this.end(session, session.endByReason ?? reason, "session_ended");
    });
    session.endByReason = reason;
    this.#deps.scheduler.set(deadline, at);
  }

  /** `session.ended`, or the abort of `signal`. */
  #ended(session: SessionEntry, signal: AbortSignal | undefined, method: string) {
    if (!signal) return session.ended;
    return new Promise<{ reason: string }>((resolve, reject) => {
      const onAbort = () => reject(new RequestAbortedError(method, signal.reason));
      if (signal.aborted) onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      session.ended.then((end) => {
        signal.removeEventListener("abort", onAbort);
        resolve(end);
      });
    });
  }

  /**
   * Ends a session: its pending tool calls fail with `ToolOutcomeUnknownError(toolReason)`, its
   * channels and terminals end, readers of its events finish. `record` says what the store
   * keeps (see {@linkcode EndRecord}).
   */
  end(
    session: SessionEntry,
    reason: string,
    toolReason: ToolOutcomeUnknownReason,
    record: EndRecord = "record",
  ): void {
    if (session.state === "ended") return;
    session.state = "ended";
    session.endReason = reason;
    session.log.close();
    if (session.endDeadline) this.#deps.scheduler.clear(session.endDeadline);
    this.#deps.calls.failPending({ sessionId: session.id }, toolReason, record !== "skip");
    for (const channel of [...session.channels?.values() ?? []]) channel.end(reason);
    session.channels = undefined;
    for (const { output } of session.terminals?.values() ?? []) output.end();
    session.terminals = undefined;
    for (const waiter of session.readyWaiters?.splice(0) ?? []) {
      waiter.reject(sessionEnded(session));
    }
    const executor = session.executor;
    if (executor.sessions?.get(session.id) === session) executor.sessions.delete(session.id);
    if (this.live.get(session.id) === session) this.live.delete(session.id);
    if (record === "record") this.#recordEnd(session);
    else if (record === "forget") this.#forget([session.id], executor.id);
    this.#observeState(session, reason);
    session.settleEnded(reason);
  }

  /** A reconnect did not resume these sessions of `executor`: they end (`lost`). */
  lost(executor: ExecutorEntry, keep: ReadonlySet<string>): string[] {
    const resumed: string[] = [];
    for (const session of [...executor.sessions?.values() ?? []]) {
      if (keep.has(session.id)) resumed.push(session.id);
      else this.end(session, "lost", "session_lost");
    }
    return resumed;
  }

  /** The executor reconnected and resumed `ids`: lossy output sent meanwhile is read back. */
  resumed(executor: ExecutorEntry, ids: readonly string[]): void {
    for (const id of ids) {
      for (const { output } of executor.sessions?.get(id)?.terminals?.values() ?? []) {
        output.resumed();
      }
    }
  }

  // ---- MCP channels ------------------------------------------------------------------------------

  async mcp(session: SessionEntry, server: string): Promise<McpChannel> {
    if (session.state === "ended") throw sessionEnded(session);
    const executor = session.executor;
    const timeoutMs = this.#deps.requestTimeoutMs;
    const { channel_id } = await request(
      executor,
      "mcp.open",
      {
        session_id: session.id,
        server,
      },
      {},
      timeoutMs,
    );
    const connection = executor.connection;
    const logger = this.#deps.logger;
    const channel = new McpChannelState(channel_id, server, session.id, {
      send: (message) => {
        if (!connection || executor.connection !== connection) throw unavailable(executor);
        connection.peer.notify("mcp.message", { channel_id, message });
      },
      close: async (reason) => {
        if (executor.channels?.get(channel_id) === channel) executor.channels.delete(channel_id);
        session.channels?.delete(channel_id);
        if (!connection || executor.connection !== connection) return;
        try {
          await connection.peer.call("mcp.close", {
            channel_id,
            session_id: session.id,
            reason,
          }, withTimeout({}, timeoutMs));
        } catch (error) {
          logger.debug("mcp.close failed", { channel_id, error: String(error) });
        }
      },
    });
    if (hasEnded(session) || !connection) {
      channel.end(hasEnded(session) ? "session_ended" : "disconnected");
      return channel.view;
    }
    (executor.channels ??= new Map()).set(channel_id, channel);
    (session.channels ??= new Map()).set(channel_id, channel);
    channel.closed.then(() => {
      if (executor.channels?.get(channel_id) === channel) executor.channels.delete(channel_id);
      session.channels?.delete(channel_id);
    });
    return channel.view;
  }

  // ---- terminals ---------------------------------------------------------------------------------

  async terminal(session: SessionEntry, options: TerminalOptions): Promise<Terminal> {
    if (session.state === "ended") throw sessionEnded(session);
    const { signal, terminal_id, ...rest } = options;
    const id = terminal_id ?? randomId("term_");
    const terminals = session.terminals ??= new Map();
    let known = terminals.get(id);
    const fresh = !known;
    const timeoutMs = this.#deps.requestTimeoutMs;
    if (!known) {
      // Routed before the request: output may arrive ahead of the answer.
      const host: TerminalHost = {
        sessionId: session.id,
        logger: this.#deps.logger,
        request: (method, params, callOptions) =>
          request(session.executor, method, params, callOptions ?? {}, timeoutMs),
      };
      const entry = {} as { terminal: Terminal; output: TerminalOutput };
      // Forgotten once its output has ended: no more notifications are needed for it.
      entry.output = new TerminalOutput(id, host, () => {
        if (session.terminals?.get(id) === entry) session.terminals.delete(id);
      });
      entry.terminal = new Terminal(id, host, entry.output);
      terminals.set(id, known = entry);
    }
    const { terminal, output } = known;
    try {
      const result = await request(
        session.executor,
        "terminal.open",
        {
          session_id: session.id,
          terminal_id: id,
          ...rest,
        },
        { signal },
        timeoutMs,
      );
      terminal.opened(result);
      // Already open on the executor (a retry, or a handle made anew): read what it holds.
      if (result.duplicate) output.resumed();
    } catch (error) {
      if (fresh) output.end();
      throw error;
    }
    // The session may have ended while terminal.open was in flight.
    if (hasEnded(session)) output.end();
    if (signal) closeOnAbort(terminal, signal, this.#deps.logger);
    return terminal;
  }

  /** A `terminal.output` notification. */
  terminalOutput(session: SessionEntry, params: TerminalOutputParams): void {
    session.terminals?.get(params.terminal_id)?.output.deliver(params);
  }

  // ---- the store -----------------------------------------------------------------------------------

  /**
   * Reads the live sessions a previous run of the harness left in the store back under their
   * executors (sessions of executors it no longer holds end), and counts the ended ones.
   */
  recover(executors: ReadonlyMap<string, ExecutorEntry>): MaybePromise<void> {
    const store = this.#deps.store;
    if (!store) return;
    return then(
      store.list<SessionRecord>(keys.sessions),
      (rows) =>
        then(store.list<number>(keys.endedOrder), (ended) => {
          this.#endedCount = ended.length;
          const orphans: string[] = [];
          for (const [, record] of rows) {
            if (record.state === "ended") continue;
            const executor = executors.get(record.executorId);
            if (!executor) {
              orphans.push(record.id);
              continue;
            }
            const session = this.#create(
              executor,
              record.id,
              record.metadata,
              record.state,
              record.agent === true,
              true,
            );
            if (record.endBy !== undefined) {
              this.#armEnd(session, record.endBy, record.endByReason ?? "stop_timeout");
            }
          }
          if (orphans.length > 0) {
            this.#deps.logger.info("sessions of executors no longer held ended", {
              sessions: orphans.length,
            });
            for (const id of orphans) {
              const record = rows.find(([, r]) => r.id === id)![1];
              this.#writeEnded(record, "lost");
            }
          }
        }),
    );
  }

  /**
   * A session by id: a live one, else one that ended and is still remembered in the store (its
   * events stay readable), read back as an ended session.
   */
  find(
    id: string,
    executors: ReadonlyMap<string, ExecutorEntry>,
  ): MaybePromise<Session | undefined> {
    const live = this.live.get(id);
    if (live || !this.#deps.store) return live?.view;
    return then(
      this.#deps.store.get<SessionRecord & { executor?: StoredRegistration }>(keys.session(id)),
      (record) => {
        if (!record) return undefined;
        const raced = this.live.get(id);
        if (raced) return raced.view;
        const executor = executors.get(record.executorId) ??
          this.#goneExecutor(record.executorId, record.executor);
        const session = new SessionEntry(
          id,
          executor,
          record.metadata,
          "ended",
          record.agent === true,
          EventLog.reopened(id, { store: this.#deps.store! }),
          this.#deps.services,
        );
        session.endReason = record.endReason ?? "ended";
        session.log.close();
        session.settleEnded(session.endReason);
        return session.view;
      },
    );
  }

  /** An entry standing for an executor the harness no longer holds (an ended session's). */
  #goneExecutor(id: string, register: StoredRegistration | undefined): ExecutorEntry {
    const entry = new ExecutorEntry(
      id,
      {},
      register ?? {
        protocol: "bma.executor.v1.1",
        executor: { name: "", os: "", arch: "", version: "" },
        environment_id: "",
      },
      {},
      0,
      false,
      this.#deps.services,
    );
    entry.gone = "closed";
    return entry;
  }

  /** Writes a session's record (its executor index with it, while live). */
  #write(session: SessionEntry): MaybePromise<void> {
    const store = this.#deps.store;
    if (!store) return;
    const deadline = session.endDeadline;
    const record: SessionRecord & { executor: StoredRegistration } = {
      id: session.id,
      executorId: session.executor.id,
      metadata: session.metadata,
      state: session.state,
      ...(session.agent ? { agent: true } : {}),
      ...(deadline?.at !== undefined
        ? { endBy: deadline.at, endByReason: session.endByReason }
        : {}),
      executor: session.executor.register,
    };
    return store.write([
      { put: keys.session(session.id), value: record },
      { put: keys.executorSession(session.executor.id, session.id), value: 1 },
    ]);
  }

  #transition(session: SessionEntry, state: SessionState): void {
    session.state = state;
    this.#safely(() => this.#write(session));
    this.#observeState(session);
  }

  #recordEnd(session: SessionEntry): void {
    const store = this.#deps.store;
    if (!store) return;
    const record: SessionRecord & { executor: StoredRegistration } = {
      id: session.id,
      executorId: session.executor.id,
      metadata: session.metadata,
      state: "ended",
      endReason: session.endReason!,
      endedAt: this.#deps.clock.now(),
      ...(session.agent ? { agent: true } : {}),
      executor: session.executor.register,
    };
    this.#writeEnded(record, session.endReason!);
  }

  #writeEnded(record: SessionRecord, reason: string): void {
    const store = this.#deps.store!;
    const endedAt = record.endedAt ?? this.#deps.clock.now();
    const ended: SessionRecord = { ...record, state: "ended", endReason: reason, endedAt };
    const written = this.#safely(() =>
      store.write([
        { put: keys.session(ended.id), value: ended },
        { delete: keys.executorSession(ended.executorId, ended.id) },
        { put: keys.ended(endedAt, ended.id), value: 1 },
      ])
    );
    this.#endedCount++;
    then(written, () => this.#trimEnded());
  }

  /** Forgets the oldest ended sessions beyond `rememberEnded`. */
  #trimEnded(): MaybePromise<void> {
    const store = this.#deps.store!;
    const excess = this.#endedCount - this.#deps.rememberEnded;
    if (excess <= 0) return;
    return then(
      this.#safely(() => store.list<number>(keys.endedOrder, { limit: excess })),
      (rows) => {
        if (!rows) return;
        const batch: StoreOp[] = [];
        for (const [key] of rows) {
          const id = key.slice(key.indexOf("/", 3) + 1);
          batch.push({ delete: key }, ...this.#forgetOps(id));
        }
        this.#endedCount -= rows.length;
        return then(this.#safely(() => store.write(batch)), () => undefined);
      },
    );
  }

  /** Deletes what the store holds of sessions that never started. */
  #forget(ids: readonly string[], executorId: string): void {
    const store = this.#deps.store;
    if (!store) return;
    const batch: StoreOp[] = [];
    for (const id of ids) {
      batch.push({ delete: keys.executorSession(executorId, id) }, ...this.#forgetOps(id));
    }
    this.#safely(() => store.write(batch));
  }

  #forgetOps(id: string): StoreOp[] {
    return [
      { delete: keys.session(id) },
      { deletePrefix: keys.events(id) },
    ];
  }

  /** A store call whose failure is logged, not thrown (housekeeping, not an acknowledgement). */
  #safely<T>(fn: () => MaybePromise<T>): MaybePromise<T | undefined> {
    const failed = (error: unknown) => {
      this.#deps.logger.warn("harness store write failed", { error: String(error) });
      return undefined;
    };
    try {
      const result = fn();
      return isPromiseLike(result) ? Promise.resolve(result).catch(failed) : result;
    } catch (error) {
      return failed(error);
    }
  }

  #observeState(session: SessionEntry, reason?: string): void {
    const observers = this.#deps.observers;
    if (!observers.active) return;
    observers.emit({
      type: "session.state",
      at: this.#deps.clock.now(),
      sessionId: session.id,
      executorId: session.executor.id,
      state: session.state,
      ...(reason !== undefined ? { reason } : {}),
    });
  }
}

/** Whether the session has ended (read again after an await: it may have meanwhile). */
function hasEnded(session: SessionEntry): boolean {
  return session.state === "ended";
}
