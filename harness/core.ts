/**
 * The harness's rules, once, for every runtime (internal): what each method an executor sends
 * does (the handler table below), and the parts that hold the harness's state — executors,
 * sessions, tool calls, event logs, leases and deadlines — over one store. `Harness` (the
 * public class) admits connections and hands them here; a runtime only moves frames.
 *
 * Start-up reads back what a previous run left in the store: executors (each with a full lease
 * from now, or the lease it had: `recoveredLeases`), their live sessions, and the tool calls
 * still pending; event logs are read back per session on first use.
 */
import { PeerHandlers, type ReplyHooks } from "../protocol/peer.ts";
import { describeError, ProtocolError } from "../protocol/errors.ts";
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import { reportingStore, StoreWriteReport } from "./store/reporting.ts";
import type { Telemetry } from "../protocol/telemetry.ts";
import { tracedStore } from "./tracing.ts";
import { meteredStore } from "./store/metered.ts";
import type { Disposable } from "../protocol/peer.ts";
import type { Transport } from "../transport/transport.ts";
import { UnsentBudget } from "../transport/unsent-budget.ts";
import type { ProtocolVersion } from "../protocol/generated/contract.ts";
import { CloseCode, NotFoundError } from "../protocol/generated/errors.ts";
import type { Authenticate, Principal } from "./principal.ts";
import { type ConnectionHost, type ConnectionSnapshot, ExecutorConnection } from "./connection.ts";
import type { SessionEventSink } from "./event-log.ts";
import type { AgentExtension, AgentExtensionHooks, AgentExtensionHost } from "./extension.ts";
import { Executors, type RecoveredLeases } from "./executors.ts";
import type { ExecutorEvent, Session } from "./handles.ts";
import { Leases } from "./lease.ts";
import { then } from "./maybe.ts";
import { HarnessMetrics, type HarnessMetricsSnapshot } from "./metrics.ts";
import { type HarnessObserver, Observers } from "./observe.ts";
import type { SessionEventRecord } from "./records.ts";
import { Scheduler } from "./scheduler.ts";
import { DEFAULT_REMEMBER_ENDED_SESSIONS, Sessions } from "./sessions.ts";
import type { EntryServices, ExecutorEntry, SessionEntry } from "./state.ts";
import {
  type HarnessStore,
  isPromiseLike,
  keyTextProblem,
  type MaybePromise,
} from "./store/store.ts";
import {
  checkStoreFormat,
  describeHolder,
  type HolderIdentity,
  StoreFencedError,
  StoreHeldError,
  StoreLockedError,
} from "./store/claim.ts";
import { ToolCallLedger } from "./tool-call-ledger.ts";
import { StoreTenure } from "./store-tenure.ts";
import { HarnessClosedError } from "./errors.ts";
import type { HarnessReadiness } from "./readiness.ts";
import { ToolCalls } from "./tool-calls.ts";

/** What the core is made with (the harness's options, resolved). */
export interface CoreOptions {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly heartbeatIntervalMs: number;
  readonly requestTimeoutMs: number | undefined;
  readonly registerTimeoutMs: number;
  readonly maxUnregisteredRequests: number;
  readonly maxFrameBytes: number | undefined;
  readonly maxFrameDepth: number | undefined;
  /** The budget of unsent bytes across all connections. */
  readonly maxUnsentBytes: number;
  readonly authenticate: Authenticate | undefined;
  readonly onSessionEvent: SessionEventSink | undefined;
  readonly maxSessionEvents: number | undefined;
  readonly maxSessionEventBytes: number | undefined;
  readonly fileServiceUrl: string | undefined;
  readonly rememberToolCalls: number | undefined;
  readonly rememberEndedSessions: number | undefined;
  readonly recoveredLeases: RecoveredLeases | undefined;
  /** Who this harness is in its store's holder record. */
  readonly holderIdentity: HolderIdentity;
  /** Claim the store even while a live harness holds it. */
  readonly takeover: boolean;
  /** While a live harness holds the store, wait for it to go instead of failing. */
  readonly standby?: boolean;
  /** How often the claim on the store is renewed, ms. */
  readonly storeRenewMs: number;
  readonly agent: AgentExtension | undefined;
  /** Told when a connection's snapshot changed (an edge harness keeps it with its socket). */
  readonly onConnectionChange:
    | ((transport: Transport, snapshot: ConnectionSnapshot) => void)
    | undefined;
  /** Opens the harness's spans (`session.assign`, `tool.call`, `turn.start`, `store.write`). */
  readonly telemetry?: Telemetry | undefined;
}

/** A connection admitted before any socket existed (or accepted as it is). */
export interface Admitted {
  readonly protocol: ProtocolVersion;
  readonly principal: Principal;
  /** No `authenticate` ran: what the executor registers as is believed (a local harness). */
  readonly trusted: boolean;
  readonly url: URL;
}

/** The harness core. */
export class HarnessCore {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly scheduler: Scheduler;
  readonly observers: Observers;
  readonly executors: Executors;
  readonly sessions: Sessions;
  readonly calls: ToolCalls;
  /** The harness's counters and histograms (gauges: {@linkcode HarnessCore.metricsSnapshot}). */
  readonly metrics: HarnessMetrics;
  /** Open connections. */
  readonly connections = new Set<ExecutorConnection>();
  /** Connections that have not registered yet (and upgrades being authenticated). */
  unregistered = 0;
  readonly #options: CoreOptions;
  readonly #services: EntryServices;
  readonly #listeners = new Set<(event: ExecutorEvent) => void>();
  readonly #tables = new Map<ProtocolVersion, PeerHandlers<ExecutorConnection>>();
  readonly #host: ConnectionHost;
  readonly #transports = new WeakMap<ExecutorConnection, Transport>();
  #agent: AgentExtensionHooks | undefined;
  /** Start-up's read of the store: a promise while an asynchronous store answers. */
  #recovering: Promise<void> | undefined;
  /** Why start-up failed (the store is held by another harness). */
  #failure: Error | undefined;
  /** This harness's claim on its store (none without a store, or on a single-writer one). */
  readonly #tenure: StoreTenure | undefined;
  /** What its store writes came to (readiness `store_failing`). */
  readonly #writeReport: StoreWriteReport;
  readonly #ledger: ToolCallLedger;
  #closed = false;
  /** Set once `close` has finished. */
  #closeFinished = false;

  constructor(options: CoreOptions) {
    this.#options = options;
    const { clock, logger } = options;
    this.scheduler = new Scheduler(clock);
    const writeReport = new StoreWriteReport(logger, clock);
    this.#writeReport = writeReport;
    const tenure = options.store && !options.store.singleWriter
      ? new StoreTenure(options.store, {
        identity: options.holderIdentity,
        clock,
        logger,
        scheduler: this.scheduler,
        takeover: options.takeover,
        standby: options.standby === true,
        renewMs: options.storeRenewMs,
        onFenced: (error) => this.#fenced(error),
        onRenewed: (failed, error) => failed ? writeReport.failed(error) : writeReport.succeeded(),
      })
      : undefined;
    this.#tenure = tenure;
    // Claimed before anything is read back: a store held by a live harness throws here, unless
    // this harness stands by for it.
    // A store that is not claimed (a single writer's) has its format checked all the same.
    const claimed = tenure ? tenure.claim() : options.store && checkStoreFormat(options.store);
    const metrics = new HarnessMetrics(clock);
    this.metrics = metrics;
    const reporting = options.store &&
      reportingStore(meteredStore(tenure?.store ?? options.store, metrics), writeReport);
    const telemetry = options.telemetry;
    const store = reporting && telemetry ? tracedStore(reporting, telemetry) : reporting;
    this.clock = clock;
    this.logger = logger;
    this.store = store;
    this.observers = new Observers(logger);
    const observers = this.observers;
    const ledger = new ToolCallLedger({
      ...(options.rememberToolCalls !== undefined ? { remember: options.rememberToolCalls } : {}),
      ...(store ? { store } : {}),
      now: metrics.now,
      onSettled: (entry, result, error) => {
        metrics.toolCallSettled(
          entry.startedAt,
          result ? result.outcome : error instanceof ProtocolError ? "refused" : "unknown",
        );
        if (!observers.active) return;
        observers.emit({
          type: "tool.settled",
          at: clock.now(),
          toolCallId: entry.id,
          sessionId: entry.sessionId,
          executorId: entry.executorId,
          ...(result ? { result } : { error }),
        });
      },
    });
    this.#ledger = ledger;
    // The handles' operations: filled in below, as each part exists.
    const services = { agent: undefined } as unknown as {
      -readonly [K in keyof EntryServices]: EntryServices[K];
    };
    this.#services = services;
    this.calls = new ToolCalls({
      ledger,
      clock,
      logger,
      observers,
      requestTimeoutMs: options.requestTimeoutMs,
      ...(telemetry ? { telemetry } : {}),
    });
    this.sessions = new Sessions({
      clock,
      logger,
      store,
      scheduler: this.scheduler,
      observers,
      calls: this.calls,
      services,
      requestTimeoutMs: options.requestTimeoutMs,
      eventSink: this.#eventSink(),
      maxSessionEvents: options.maxSessionEvents,
      maxSessionEventBytes: options.maxSessionEventBytes,
      rememberEnded: options.rememberEndedSessions ?? DEFAULT_REMEMBER_ENDED_SESSIONS,
      metrics,
      ...(telemetry ? { telemetry } : {}),
    });
    this.executors = new Executors({
      clock,
      logger,
      store,
      leases: new Leases(clock, options.heartbeatIntervalMs, this.scheduler),
      observers,
      sessions: this.sessions,
      calls: this.calls,
      services,
      heartbeatIntervalMs: options.heartbeatIntervalMs,
      requestTimeoutMs: options.requestTimeoutMs,
      fileServiceUrl: options.fileServiceUrl,
      recoveredLeases: options.recoveredLeases ?? "fresh",
      emit: (event) => this.emit(event),
      ...(telemetry ? { telemetry } : {}),
    });
    services.executors = this.executors;
    services.sessions = this.sessions;
    services.calls = this.calls;
    this.#host = this.#connectionHost();
    if (options.agent) {
      const hooks = options.agent.attach(this.#agentHost());
      this.#agent = hooks;
      services.agent = hooks;
    }
    const recovered = isPromiseLike(claimed)
      ? claimed.then(() => this.#recover(ledger))
      : this.#recover(ledger);
    if (isPromiseLike(recovered)) {
      this.#recovering = Promise.resolve(recovered).then(
        () => void (this.#recovering = undefined),
        (error) => {
          this.#recovering = undefined;
          if (this.#closed && error instanceof HarnessClosedError) return;
          // Never serve on a store not read back: a harness that could not claim its store (held,
          // locked, unreachable) or read it fails its start-up.
          if (error instanceof StoreHeldError) {
            // Who holds it, not what to do: the advice is the caller's (a CLI names its flags).
            logger.error("the harness store is held by another harness", {
              holder: describeHolder(error.holder, this.clock.now()),
            });
          } else if (error instanceof StoreLockedError) {
            logger.error(error.message);
          } else {
            logger.error("claiming or reading the harness store back failed", {
              error: describeError(error),
            });
          }
          this.#failure = error;
          void this.close();
        },
      );
    }
  }

  /**
   * Settles once start-up has read the store back (at once with a synchronous store); rejects
   * with `StoreHeldError` when another live harness holds the store.
   */
  get ready(): Promise<void> {
    if (this.#failure) return Promise.reject(this.#failure);
    return this.#recovering?.then(() => this.ready) ?? Promise.resolve();
  }

  /**
   * Whether this harness takes executors now ({@linkcode HarnessReadiness}): what `/readyz`
   * answers.
   */
  get readiness(): HarnessReadiness {
    if (this.#failure instanceof StoreFencedError) return "fenced";
    if (this.#closed) return this.#closeFinished ? "closed" : "draining";
    if (this.#tenure?.standingBy) return "standby";
    if (this.#recovering) return "starting";
    return this.#writeReport.failing ? "store_failing" : "serving";
  }

  /** Another harness took the store over: this one stops, and its executors go to that one. */
  #fenced(error: StoreFencedError): void {
    this.logger.error(error.message);
    this.#failure = error;
    void this.close();
  }

  /** Why this harness stopped serving: another harness holds, or took over, its store. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** Serves an executor on an admitted transport. */
  open(transport: Transport, admitted: Admitted): void {
    if (this.#recovering) {
      // Frames wait in the transport until the connection listens.
      this.#recovering.then(() => this.open(transport, admitted));
      return;
    }
    if (this.#closed) {
      transport.close(CloseCode.GOING_AWAY, this.#closeReason());
      return;
    }
    this.unregistered++;
    const connection = new ExecutorConnection(
      transport,
      admitted.protocol,
      admitted.principal,
      admitted.trusted,
      admitted.url,
      this.#host,
    );
    this.#track(connection, transport);
    // Its first snapshot: an edge harness evicted before the register keeps its deadlines.
    this.#host.changed?.(connection);
  }

  /**
   * Serves an executor on a transport whose connection state was kept (an edge harness evicted
   * while its socket lived on): registered and bound to its executor as before, without a new
   * `executor.register`. The executor's lease continues from the snapshot.
   */
  restore(transport: Transport, snapshot: ConnectionSnapshot): MaybePromise<void> {
    if (this.#recovering) return this.#recovering.then(() => this.restore(transport, snapshot));
    if (this.#closed) {
      transport.close(CloseCode.GOING_AWAY, this.#closeReason());
      return;
    }
    const executor = snapshot.executorId !== undefined
      ? this.executors.byId.get(snapshot.executorId)
      : undefined;
    if (snapshot.state === "registered" && !executor) {
      // The executor is no longer held (its lease ran out meanwhile): it registers anew.
      transport.close(CloseCode.LEASE_EXPIRED, "lease expired");
      return;
    }
    const registered = snapshot.state === "registered" && executor !== undefined;
    if (!registered) this.unregistered++;
    const connection = new ExecutorConnection(
      transport,
      snapshot.protocol,
      snapshot.principal,
      snapshot.trusted,
      new URL(snapshot.url),
      this.#host,
      { snapshot, executor },
    );
    this.#track(connection, transport);
    if (!registered) return;
    const previous = executor.connection;
    executor.connection = connection;
    connection.peer.capabilities = executor.capabilities;
    if (previous && previous !== connection) previous.replaced();
    if (snapshot.leaseExpiresAt !== undefined) executor.lease?.extend(snapshot.leaseExpiresAt);
    this.executors.restored(executor);
    // Acks lost with the evicted peer: the calls go out again (the executor runs each once).
    this.calls.redispatch(executor, connection);
  }

  #track(connection: ExecutorConnection, transport: Transport): void {
    this.connections.add(connection);
    if (this.#options.onConnectionChange) this.#transports.set(connection, transport);
  }

  /** Calls `listener` on every change of the executors. */
  onExecutor(listener: (event: ExecutorEvent) => void): Disposable {
    this.#listeners.add(listener);
    return { dispose: () => void this.#listeners.delete(listener) };
  }

  /** Adds an observer. */
  observe(listener: HarnessObserver): Disposable {
    return this.observers.add(listener);
  }

  /** Reports an executor change to the listeners. */
  emit(event: ExecutorEvent): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(event);
      } catch (error) {
        this.logger.warn("executor listener failed", { error: describeError(error) });
      }
    }
  }

  /** A session by id: live, or ended and remembered (synchronous stores). */
  session(id: string): Session | undefined {
    // An id no store can hold names no session (and is no reason to read the store).
    if (keyTextProblem(id) !== undefined) return undefined;
    const found = this.sessions.find(id, this.executors.byId);
    return isPromiseLike(found) ? this.sessions.live.get(id)?.view : found;
  }

  /** A session by id as `session` finds it, also from a store that answers later. */
  findSession(id: string): Promise<Session | undefined> {
    if (keyTextProblem(id) !== undefined) return Promise.resolve(undefined);
    return Promise.resolve(this.sessions.find(id, this.executors.byId));
  }

  /**
   * Closes: executors are released (their sessions end, pending calls fail with
   * `ToolOutcomeUnknownError`, in memory only: the store keeps them for the next harness),
   * connections close with 1001, deadlines stop.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#tenure?.stop();
    for (const executor of [...this.executors.byId.values()]) {
      this.executors.release(executor, "harness_closed");
    }
    const reason = this.#closeReason();
    const closing = [...this.connections].map((c) => c.close(CloseCode.GOING_AWAY, reason));
    this.scheduler.stop();
    this.#agent?.close?.();
    await Promise.all(closing);
    // Let go of the store last: the next harness may claim it at once.
    if (this.#tenure && !this.#failure) await this.#tenure.release();
    this.#closeFinished = true;
  }

  /** The reason a closed harness gives its connections (1001: they reconnect, maybe elsewhere). */
  #closeReason(): string {
    if (this.#failure instanceof StoreFencedError) return "another harness took the store over";
    if (this.#failure instanceof StoreHeldError) return "another harness holds the store";
    return "harness shutting down";
  }

  /** The metrics now: the counters and histograms, and the gauges counted from the tables. */
  metricsSnapshot(): HarnessMetricsSnapshot {
    let connected = 0;
    for (const executor of this.executors.byId.values()) if (executor.connection) connected++;
    return this.metrics.snapshot({
      executorsConnected: connected,
      executorsHeld: this.executors.byId.size,
      sessionsLive: this.sessions.live.size,
      toolCallsInFlight: this.#ledger.inFlight,
    });
  }

  /** Whether the core was closed. */
  get closed(): boolean {
    return this.#closed;
  }

  // ---- start-up ----------------------------------------------------------------------------------

  #recover(ledger: ToolCallLedger): MaybePromise<void> {
    if (!this.store) return;
    const executors = this.executors;
    // Executors still attached to a harness that froze notice only when a heartbeat goes
    // unanswered for two intervals, up to three after its last answer (before this claim):
    // their recovered leases count that too, so they reconnect here within them.
    const graceMs = this.#tenure?.tookOver ? 3 * this.#options.heartbeatIntervalMs : 0;
    return then(
      executors.recover(graceMs),
      () =>
        then(this.sessions.recover(executors.byId), () =>
          then(
            ledger.recover((pending) =>
              executors.byId.get(pending.executorId)?.sessions?.get(pending.sessionId) !== undefined
            ),
            (entries) => {
              if (executors.byId.size > 0) {
                this.logger.info("harness recovered from its store", {
                  executors: executors.byId.size,
                  sessions: this.sessions.live.size,
                  pending_calls: entries.length,
                });
              }
              return this.#agent?.recover?.();
            },
          )),
    );
  }

  /** The sink of durable events: the user's, then the agent capability's for agent events. */
  #eventSink(): SessionEventSink | undefined {
    const user = this.#options.onSessionEvent;
    if (!this.#options.agent) return user;
    return (record: SessionEventRecord) => {
      const agent = this.#agent;
      if (!user) return record.event_id !== undefined ? agent?.acceptEvent(record) : undefined;
      return then(
        user(record) as MaybePromise<void>,
        () => record.event_id !== undefined ? agent?.acceptEvent(record) : undefined,
      ) as void | Promise<void>;
    };
  }

  // ---- connections -------------------------------------------------------------------------------

  #connectionHost(): ConnectionHost {
    const options = this.#options;
    return {
      clock: this.clock,
      logger: this.logger,
      scheduler: this.scheduler,
      maxFrameBytes: options.maxFrameBytes,
      maxFrameDepth: options.maxFrameDepth,
      unsentBudget: new UnsentBudget(options.maxUnsentBytes),
      requestTimeoutMs: options.requestTimeoutMs,
      maxUnregisteredRequests: options.maxUnregisteredRequests,
      registerTimeoutMs: options.registerTimeoutMs,
      authenticate: options.authenticate,
      handlers: (protocol) => this.#handlers(protocol),
      register: (connection, params, reply) => this.executors.register(connection, params, reply),
      settled: () => void this.unregistered--,
      closed: (connection, executor, forGood) => {
        this.connections.delete(connection);
        if (executor) this.executors.detach(executor, connection, forGood);
      },
      ...(options.onConnectionChange
        ? {
          changed: (connection: ExecutorConnection) => {
            const transport = this.#transports.get(connection);
            if (transport) options.onConnectionChange!(transport, connection.snapshot());
          },
        }
        : {}),
    };
  }

  /** The handler table of a protocol version, built on first use. */
  #handlers(protocol: ProtocolVersion): PeerHandlers<ExecutorConnection> {
    let table = this.#tables.get(protocol);
    if (!table) this.#tables.set(protocol, table = this.#serve(protocol));
    return table;
  }

  /** What each method an executor sends does. */
  #serve(protocol: ProtocolVersion): PeerHandlers<ExecutorConnection> {
    const { executors, sessions, calls, logger } = this;
    const changed = this.#host.changed;
    const table = new PeerHandlers<ExecutorConnection>();
    table.admit = (connection, method) => connection.admit(method);
    table.refused = (connection, code) => connection.refused(code);

    table.onRequest(
      "executor.register",
      (params, context, connection) => connection.register(params, context),
    );

    table.onRequest("executor.heartbeat", (_params, _, connection) => {
      const result = executors.heartbeat(connection.bound());
      changed?.(connection);
      return result;
    });

    if (this.#options.authenticate && protocol !== "bma.executor.v1") {
      table.onRequest(
        "executor.token.refresh",
        ({ token }, _, connection) => connection.refresh(token),
      );
    }

    table.onRequest("session.ready", ({ session_id }, _, connection) => {
      const session = sessionOf(connection, session_id);
      return then(
        sessions.markReady(session),
        (repeat) => repeat ? { ok: true, duplicate: true } : { ok: true },
      );
    });

    table.onRequest("session.event", (params, context, connection) => {
      const session = sessionOf(connection, params.session_id);
      return sessions.appendEvent(session, params, context.id, context.frameLength);
    });

    table.onRequest(
      "session.ended",
      ({ session_id, reason }, _, connection) =>
        sessions.executorEnded(connection.bound(), session_id, reason),
    );

    table.onRequest(
      "tool.result",
      (params, _, connection) => calls.result(connection.bound(), params),
    );

    table.onRequest("mcp.close", ({ channel_id, reason }, _, connection) => {
      const executor = connection.bound();
      const channel = executor.channels?.get(channel_id);
      if (!channel || channel.closeReason !== undefined) return { closed: false };
      executor.channels!.delete(channel_id);
      channel.end(reason ?? "closed by executor");
      return { closed: true };
    });

    table.onNotification("mcp.message", ({ channel_id, message }, connection) => {
      const channel = connection.bound().channels?.get(channel_id);
      if (!channel) {
        logger.warn("mcp.message for an unknown channel dropped", { channel_id });
        return;
      }
      channel.deliver(message as { jsonrpc: "2.0" });
    });

    table.onNotification("executor.capabilities.update", ({ capabilities }, connection) => {
      executors.updateCapabilities(connection.bound(), capabilities);
    });

    table.onNotification("executor.close", (_params, connection) => connection.closingForGood());

    table.onNotification("session.status", (params, connection) => {
      const session = connection.bound().sessions?.get(params.session_id);
      if (session) sessions.status(session, params);
    });

    table.onNotification("tool.progress", (params, connection) => {
      const session = connection.bound().sessions?.get(params.session_id);
      if (session) calls.progress(session, params);
    });

    table.onNotification("terminal.output", (params, connection) => {
      const session = connection.bound().sessions?.get(params.session_id);
      if (session) sessions.terminalOutput(session, params);
    });

    // The agent capability's executor-to-harness methods: served only with an agent capability,
    // so a harness without one answers -32601 (the executor then keeps its tokens).
    const agent = this.#agent;
    if (agent) {
      table.onNotification("session.event_delta", (params, connection) => {
        const executor = connection.bound();
        const observers = this.observers;
        if (observers.active) {
          observers.emit({
            type: "session.delta",
            at: this.clock.now(),
            sessionId: params.session_id,
            executorId: executor.id,
            delta: params,
          });
        }
        agent.delta(executor.handle, params);
      });
      table.onRequest(
        "interaction.request",
        (params, context, connection) =>
          agent.requestInteraction(connection.bound().handle, params, context as ReplyHooks),
      );
      table.onRequest(
        "interaction.cancel",
        (params, _, connection) => agent.cancelInteraction(connection.bound().handle, params),
      );
      table.onRequest(
        "model_token.refresh",
        (params, _, connection) => agent.modelToken(connection.bound().handle, params),
      );
      table.onRequest(
        "tools_token.refresh",
        (params, _, connection) => agent.toolsToken(connection.bound().handle, params),
      );
    }
    return table;
  }

  // ---- the agent capability's host ------------------------------------------------------------

  #agentHost(): AgentExtensionHost {
    const observers = this.observers;
    const entry = (id: string): ExecutorEntry => {
      const executor = this.executors.byId.get(id);
      if (!executor) throw new NotFoundError("unknown executor", { reason: "unknown_executor" });
      return executor;
    };
    const live = (id: string): SessionEntry | undefined => this.sessions.live.get(id);
    return {
      clock: this.clock,
      logger: this.logger,
      scheduler: this.scheduler,
      store: this.store,
      onExecutor: (listener) => this.onExecutor(listener),
      executor: (id) => this.executors.byId.get(id)?.handle,
      epoch: (id) => this.executors.byId.get(id)?.epoch ?? 0,
      openSession: (executorId, sessionId) => this.sessions.open(entry(executorId), sessionId).view,
      endSession: (sessionId, reason) => {
        const session = live(sessionId);
        if (session) this.sessions.end(session, reason, "session_ended");
      },
      awaitSessionEnd: (sessionId, timeoutMs, reason) => {
        const session = live(sessionId);
        if (session) this.sessions.awaitEnd(session, timeoutMs, reason);
      },
      get observing() {
        return observers.active;
      },
      observe: (observation) => this.observers.emit(observation),
    };
  }
}

/** The live session `id` of the connection's executor, or -32002 `unknown_session`. */
function sessionOf(connection: ExecutorConnection, id: string): SessionEntry {
  const session = connection.bound().sessions?.get(id);
  if (!session) throw new NotFoundError("unknown session", { reason: "unknown_session" });
  return session;
}
