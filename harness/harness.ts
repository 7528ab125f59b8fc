/**
 * The harness end of the protocol: it serves executors (authenticating them before the upgrade),
 * holds them through reconnects within their lease and across its own restarts (over its
 * {@linkcode HarnessStore}), and hands out {@linkcode ExecutorHandle}s to assign sessions and
 * call tools on. Runtime-neutral: the server comes from an injected factory (`harness/node.ts`
 * supplies the `ws` one), `fetch` and `accept` take web-standard requests and any
 * {@linkcode Transport}, and `restore` takes a transport back with its kept state (an edge
 * runtime that evicts the harness while its sockets live on). The rules live in `core.ts`.
 */
import type { Hono } from "hono";
import { systemClock } from "../protocol/clock.ts";
import { redactingLogger, silentLogger } from "../protocol/logger.ts";
import { DEFAULT_MAX_FRAME_BYTES, type Disposable } from "../protocol/peer.ts";
import { telemetryOf } from "../protocol/telemetry.ts";
import { PROTOCOLS } from "../protocol/generated/contract.ts";
import { CloseCode } from "../protocol/generated/errors.ts";
import { aborted, raceSignal, throwIfAborted } from "../protocol/abort.ts";
import type { Dialer, Transport } from "../transport/transport.ts";
import type { RunningServer, UpgradeDecision, WebSocketServe } from "../transport/server.ts";
import { isUpgradeRequest, offeredProtocols } from "../transport/server.ts";
import { webSocketTransport } from "../transport/websocket.ts";
import { browserAnswer, CONNECT_PATHS, createHarnessApp, type FetchOptions } from "./app.ts";
import { type ArtifactStore, MemoryArtifactStore } from "./artifacts.ts";
import { StoreArtifactStore } from "./store/store-artifacts.ts";
import type { ConnectionSnapshot } from "./connection.ts";
import { type Admitted, HarnessCore } from "./core.ts";
import { type DialedExecutorLink, DialLink, type HarnessDialOptions } from "./dial-link.ts";
import {
  ConnectRefusedError,
  HarnessClosedError,
  HarnessConfigError,
  InsecureServeError,
  NoDialerError,
  NoServerFactoryError,
} from "./errors.ts";
import type { ExecutorEvent, ExecutorHandle, Session } from "./handles.ts";
import type {
  HarnessOptions,
  ServeOptions,
  ServeUnixOptions,
  WaitExecutorOptions,
} from "./harness-options.ts";
import {
  checkHarnessOptions,
  DEFAULT_HEARTBEAT_INTERVAL_MS,
  DEFAULT_MAX_ARTIFACT_BYTES,
  DEFAULT_MAX_UNREGISTERED_CONNECTIONS,
  DEFAULT_MAX_UNSENT_BYTES,
} from "./harness-options.ts";
import { type HarnessMetricsSnapshot, METRICS_OF } from "./metrics.ts";
import { METRICS_PATH } from "../http/metrics/endpoint.ts";
import type { HarnessObserver } from "./observe.ts";
import {
  labelPairs,
  OPENMETRICS_CONTENT_TYPE,
  renderOpenMetrics,
} from "../http/metrics/openmetrics.ts";
import { jsonAnswer } from "../http/shared/json-answer.ts";
import { ApiError, apiErrorAnswer } from "../http/shared/api-error.ts";
import {
  type Authenticate,
  bearerToken,
  type ConnectRequest,
  expiryOf,
  type Principal,
} from "./principal.ts";
import { DEFAULT_STORE_RENEW_MS, StoreFencedError, UNKNOWN_HOLDER } from "./store/claim.ts";
import { TokenIssuer } from "../http/token-endpoint/token-issuer.ts";
import type { ToolCallStatus } from "./tool-calls.ts";
import { type HarnessReadiness, standsAside } from "./readiness.ts";
import { LogThrottle } from "../protocol/log-throttle.ts";

/** A listening harness server. */
export interface HarnessServer {
  /** The WebSocket URL executors connect to (`ws://host:port` or `unix:///path.sock`). */
  readonly url: string;
  /** The HTTP base URL (token endpoint, artifacts), or the `unix://` URL of a socket. */
  readonly httpUrl: string;
  /** Stops listening and closes its connections with 1001 (executors reconnect elsewhere). */
  close(): Promise<void>;
  /** Closes it as `close` does: `await using server = await harness.serve(…)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The principal of a connection nobody authenticated: one object for all of them. */
const NO_PRINCIPAL: Principal = Object.freeze({});

/**
 * How long a close waits for the requests its servers are answering before it closes their
 * connections: the brain's waits end with the close (503 `harness_closed`), and their answers
 * must go out first; a request that still runs then (a user's route) is cut.
 */
const ANSWER_GRACE_MS = 1_000;

/** The harness. */
export class Harness {
  /** Where uploaded artifacts are. */
  readonly artifacts: ArtifactStore;

  readonly #core: HarnessCore;
  readonly #authenticate: Authenticate | undefined;
  readonly #insecureNoAuth: boolean;
  readonly #tokens: TokenIssuer | undefined;
  readonly #serverFactory: WebSocketServe | undefined;
  readonly #maxFrameBytes: number | undefined;
  readonly #maxUnregisteredConnections: number;
  readonly #handshakeTimeoutMs: number | undefined;
  /** Refused upgrades are logged once a second at most: a storm of them is not a log storm. */
  readonly #refusedUpgrades: LogThrottle;
  readonly #crowdedUpgrades: LogThrottle;
  readonly #app: Hono<{ Bindings: FetchOptions }>;
  readonly #servers = new Set<RunningServer>();
  readonly #links = new Set<DialLink>();
  readonly #dialer: Dialer | undefined;
  readonly #closeWaiters = new Set<() => void>();
  /** The answers its servers' HTTP requests are waiting for. */
  readonly #answering = new Set<Promise<Response>>();
  #closed = false;
  /** Closed before it served: while it stood by, or read its store back. */
  #closedBeforeServing = false;

  /** A harness; it serves nothing until `serve`, `serveUnix`, `accept` or `dial`. */
  constructor(options: HarnessOptions = {}) {
    checkHarnessOptions(options);
    const endpoint = options.metricsEndpoint;
    // Label names are checked first: a mistake fails here, not at the first scrape.
    const labels = endpoint && labelPairs(endpoint.labels);
    const clock = options.clock ?? systemClock;
    const logger = redactingLogger(options.logger ?? silentLogger);
    const heartbeatIntervalMs = options.heartbeatIntervalMs ?? DEFAULT_HEARTBEAT_INTERVAL_MS;
    this.#tokens = options.tokens ? new TokenIssuer(options.tokens, clock) : undefined;
    const tokens = this.#tokens;
    this.#authenticate = options.authenticate ??
      (tokens
        ? (request: ConnectRequest) => {
          if (!request.token) throw new ConnectRefusedError();
          return tokens.verify(request.token);
        }
        : undefined);
    this.#insecureNoAuth = options.insecureNoAuth ?? false;
    this.#serverFactory = options.server;
    this.#dialer = options.dial;
    this.#maxFrameBytes = options.maxFrameBytes;
    this.#maxUnregisteredConnections = options.maxUnregisteredConnections ??
      DEFAULT_MAX_UNREGISTERED_CONNECTIONS;
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs;
    this.#refusedUpgrades = new LogThrottle(clock);
    this.#crowdedUpgrades = new LogThrottle(clock);
    this.#core = new HarnessCore({
      clock,
      logger,
      store: options.store,
      heartbeatIntervalMs,
      requestTimeoutMs: options.requestTimeoutMs,
      registerTimeoutMs: options.registerTimeoutMs ?? 2 * heartbeatIntervalMs,
      maxUnregisteredRequests: options.maxUnregisteredRequests ?? 16,
      maxFrameBytes: options.maxFrameBytes,
      maxFrameDepth: options.maxFrameDepth,
      maxUnsentBytes: options.maxUnsentBytes ?? DEFAULT_MAX_UNSENT_BYTES,
      authenticate: this.#authenticate,
      onSessionEvent: options.onSessionEvent,
      maxSessionEvents: options.maxSessionEvents,
      maxSessionEventBytes: options.maxSessionEventBytes,
      fileServiceUrl: options.fileServiceUrl,
      rememberToolCalls: options.rememberToolCalls,
      rememberEndedSessions: options.rememberEndedSessions,
      recoveredLeases: options.recoveredLeases,
      holderIdentity: options.holderIdentity ?? UNKNOWN_HOLDER,
      takeover: options.takeover ?? false,
      standby: options.standby ?? false,
      storeRenewMs: options.storeRenewMs ?? DEFAULT_STORE_RENEW_MS,
      agent: options.agent,
      onConnectionChange: options.onConnectionChange,
      telemetry: telemetryOf(options.telemetry, "bma-executor-sdk/harness", logger),
    });
    if (options.deadlines) this.#core.scheduler.drive(options.deadlines);
    const core = this.#core;
    // With a store it claims, in it: what results point at survives a restart and a failover
    // with the results. A Durable Object's storage (values of at most 128 KiB) keeps none.
    const maxBytes = options.maxStoredArtifactBytes;
    const bound = maxBytes !== undefined ? { maxBytes } : {};
    this.artifacts = options.artifacts ??
      (core.store && !options.store?.singleWriter
        ? new StoreArtifactStore(core.store, bound)
        : new MemoryArtifactStore(bound));
    // For `meterHarness` (metrics-otel.ts), which only an application that reports to
    // OpenTelemetry imports: a bundle without it carries none of it.
    METRICS_OF.set(this, core.metrics);
    this.#app = createHarnessApp({
      tokens: this.#tokens,
      authenticate: this.#authenticate,
      artifacts: this.artifacts,
      maxArtifactBytes: options.maxArtifactBytes ?? DEFAULT_MAX_ARTIFACT_BYTES,
      logger,
      clock: core.clock,
      readiness: () => core.readiness,
      connect: (request, fetchOptions) => this.#connectViaFetch(request, fetchOptions),
      metrics: endpoint && {
        path: METRICS_PATH,
        authorize: (request) => endpoint.authorize(request),
        text: () => renderOpenMetrics(core.metricsSnapshot(), labels!),
        contentType: OPENMETRICS_CONTENT_TYPE,
      },
    });
  }

  /**
   * Settles once the harness has read its store back (executors, live sessions, pending tool
   * calls): at once with a store that answers synchronously (memory, SQLite, Durable Objects).
   * Connections that arrive earlier wait for it. Rejects with `StoreHeldError` when another live
   * harness holds the store, and with `HarnessClosedError` when the harness was closed before it
   * served (while it stood by, or read its store back).
   */
  get ready(): Promise<void> {
    return this.#core.ready.then(() => {
      if (this.#closedBeforeServing) throw new HarnessClosedError();
    });
  }

  /**
   * Set once another harness took the store over (`takeover`): this one has closed its
   * executors' connections and writes nothing more to the store; close it.
   */
  get fenced(): StoreFencedError | undefined {
    const failure = this.#core.failure;
    return failure instanceof StoreFencedError ? failure : undefined;
  }

  /**
   * The executors the harness holds (registered, or read back from its store, lease not
   * expired), in registration order.
   */
  get executors(): readonly ExecutorHandle[] {
    return [...this.#core.executors.byId.values()].map((e) => e.handle);
  }

  /** An executor by id. */
  executor(id: string): ExecutorHandle | undefined {
    return this.#core.executors.byId.get(id)?.handle;
  }

  /** Every live session, by id. */
  get sessions(): ReadonlyMap<string, Session> {
    const out = new Map<string, Session>();
    for (const [id, session] of this.#core.sessions.live) out.set(id, session.view);
    return out;
  }

  /**
   * A session by id: a live one — also one a previous run of the harness held, read back from
   * the store, with its events and pending tool calls — else one that ended and is still
   * remembered in a store that answers synchronously (its events stay readable).
   */
  session(id: string): Session | undefined {
    return this.#core.session(id);
  }

  /**
   * A session by id, as {@linkcode session} finds it, and also one that ended and is remembered
   * in a store that answers later (PostgreSQL): what a lookup that may wait should use (the
   * brain API's).
   */
  findSession(id: string): Promise<Session | undefined> {
    return this.#core.findSession(id);
  }

  /**
   * A tool call by its `tool_call_id`, whatever its session: pending, or settled and still
   * remembered (also one settled before the harness restarted on its store). Its `outcome`
   * settles as the `callTool` that made it does; `undefined` for an id the harness does not
   * know.
   */
  toolCall(id: string): Promise<ToolCallStatus | undefined> {
    return Promise.resolve(this.#core.calls.status(id));
  }

  /**
   * The harness's metrics now: executors connected and held, live sessions, tool calls in
   * flight and settled (by outcome), their durations, durable events accepted, store write
   * durations and failures. What `GET /metrics` shows (`metricsEndpoint`), and
   * `openMetricsText(harness.metrics)` writes.
   */
  get metrics(): HarnessMetricsSnapshot {
    return this.#core.metricsSnapshot();
  }

  /** Calls `listener` on every change of the executors (registered, reconnected, disconnected, gone). */
  onExecutor(listener: (event: ExecutorEvent) => void): Disposable {
    return this.#core.onExecutor(listener);
  }

  /**
   * Calls `listener` with every observation of the harness ({@linkcode HarnessObservation}):
   * executors, sessions, tool calls, durable events, deltas, interactions. Nothing is built for
   * observers while none listens.
   */
  observe(listener: HarnessObserver): Disposable {
    return this.#core.observe(listener);
  }

  /**
   * Resolves with an executor matching `filter` (default: connected and not draining): one the
   * harness already holds, else the next to register. A `filter` that throws rejects the wait
   * with its error.
   */
  waitExecutor(options: WaitExecutorOptions = {}): Promise<ExecutorHandle> {
    const filter = options.filter ?? ((e: ExecutorHandle) => e.connected && !e.draining);
    const signal = options.signal;
    if (this.#closed) return Promise.reject(new HarnessClosedError());
    const refused = aborted(signal, "waitExecutor");
    if (refused) return refused;
    try {
      for (const executor of this.#core.executors.byId.values()) {
        if (filter(executor.handle)) return Promise.resolve(executor.handle);
      }
    } catch (error) {
      // The caller's filter failed: its error is the wait's answer, as a rejected promise.
      return Promise.reject(error);
    }
    let done!: () => void;
    const arrived = new Promise<ExecutorHandle>((resolve, reject) => {
      done = () => {
        subscription.dispose();
        this.#closeWaiters.delete(onClose);
      };
      const subscription = this.#core.onExecutor((event: ExecutorEvent) => {
        if (event.type !== "registered" && event.type !== "reconnected") return;
        let chosen: boolean;
        try {
          chosen = filter(event.executor);
        } catch (error) {
          // Thrown inside the harness's own listener, it would be lost and the wait hang.
          done();
          reject(error);
          return;
        }
        if (chosen) {
          done();
          resolve(event.executor);
        }
      });
      const onClose = () => {
        done();
        reject(new HarnessClosedError());
      };
      this.#closeWaiters.add(onClose);
    });
    return raceSignal(arrived, signal, "waitExecutor", () => done());
  }

  /**
   * Runs the deadlines that are due (leases, register and token deadlines, stop waits,
   * interaction expiries): what a Durable Object's `alarm()` calls when the harness was given
   * its alarm as `deadlines`.
   */
  runDeadlines(now?: number): void {
    this.#core.scheduler.runDue(now);
  }

  /** When the earliest deadline falls due (ms since the epoch), if any. */
  get nextDeadline(): number | undefined {
    return this.#core.scheduler.next();
  }

  /**
   * Listens on TCP for executors (WebSocket) and HTTP (token endpoint, artifacts). Needs a
   * server factory, and `authenticate` (or `tokens`) unless `insecureNoAuth` is set.
   */
  serve(options: ServeOptions = {}): Promise<HarnessServer> {
    if (!this.#authenticate && !this.#insecureNoAuth) {
      return Promise.reject(new InsecureServeError());
    }
    const { hostname, port } = options;
    // "" would listen on every interface and name itself `ws://:port`.
    if (hostname !== undefined && (typeof hostname !== "string" || hostname === "")) {
      return Promise.reject(new HarnessConfigError("hostname", "must be a host name or address"));
    }
    if (port !== undefined && !(Number.isInteger(port) && port >= 0 && port <= 65535)) {
      return Promise.reject(new HarnessConfigError("port", "must be an integer from 0 to 65535"));
    }
    return this.#listen(
      { hostname: options.hostname ?? "127.0.0.1", port: options.port ?? 0 },
      options.fetch,
    );
  }

  /** Listens on a Unix socket (or Windows named pipe) path. */
  serveUnix(path: string, options: ServeUnixOptions = {}): Promise<HarnessServer> {
    return this.#listen({ path }, options.fetch);
  }

  /**
   * Whether the harness takes executors now: `serving` once it holds its store and has read it
   * back; `starting` before, `standby` while another harness holds the store (`standby`),
   * `draining` while it closes, `fenced` once another harness took the store over, `closed`.
   * What a readiness probe (`/readyz`) answers.
   */
  get readiness(): HarnessReadiness {
    return this.#core.readiness;
  }

  /**
   * Dials an executor that listens on a local socket (`ExecutorClient.listen`; seed 003: the
   * brain dials the executor), offering the subprotocols; the executor then registers as if it
   * had dialed in. Resolves once the socket is open. When the connection ends, the link dials
   * again with backoff so the executor can resume, unless the close code forbids it. No
   * `authenticate` runs: the harness chose whom to dial. Needs a dialer (`dial` option, or a
   * runtime preset).
   */
  async dial(url: string, options: HarnessDialOptions = {}): Promise<DialedExecutorLink> {
    if (this.#closed) throw new HarnessClosedError();
    const dial = this.#dialer;
    if (!dial) throw new NoDialerError();
    throwIfAborted(options.signal, "dial");
    const link = new DialLink(url, {
      dial,
      clock: this.#core.clock,
      logger: this.#core.logger,
      maxFrameBytes: this.#maxFrameBytes,
      open: (transport, connectUrl) => {
        const protocol = PROTOCOLS.find((p) => p === transport.protocol);
        if (!protocol) {
          transport.close(CloseCode.PROTOCOL_MISMATCH, "unsupported subprotocol");
          return;
        }
        this.#open(transport, {
          protocol,
          principal: NO_PRINCIPAL,
          trusted: true,
          url: connectUrl,
        });
      },
    }, options);
    this.#links.add(link);
    link.closed.then(() => this.#links.delete(link));
    await link.start(options.signal);
    return link;
  }

  /**
   * Decides on a WebSocket upgrade, for custom server adapters: checks the path, picks the
   * subprotocol (`bma.executor.v1.1` preferred; neither offered: 400) and authenticates
   * (refused: 401), all before any socket exists.
   */
  async upgrade(request: Request, protocols: string[]): Promise<UpgradeDecision> {
    const admitted = await this.#admit(request, protocols);
    if (admitted instanceof Response) return { accept: false, response: admitted };
    return {
      accept: true,
      protocol: admitted.protocol,
      onOpen: (transport) => this.#open(transport, admitted),
    };
  }

  /**
   * The web-standard handler: token endpoints, artifact uploads and (with `options.upgrade`)
   * the WebSocket connect endpoint. Mount it in any server.
   */
  fetch(request: Request, options: FetchOptions = {}): Promise<Response> {
    return Promise.resolve(this.#app.fetch(request, options));
  }

  /**
   * Serves an executor on an already open transport (in-process pairs, custom servers). With
   * `authenticate` set, `request` is judged like a connect request (refused: the transport is
   * closed with 4002 and this rejects with `ConnectRefusedError`).
   */
  async accept(transport: Transport, request?: Request): Promise<void> {
    const protocol = PROTOCOLS.find((p) => p === transport.protocol);
    if (!protocol) {
      transport.close(CloseCode.PROTOCOL_MISMATCH, "unsupported subprotocol");
      throw new ConnectRefusedError();
    }
    const url = new URL(request?.url ?? "http://localhost/");
    let principal: Principal = NO_PRINCIPAL;
    if (this.#authenticate) {
      const headers = request?.headers ?? new Headers();
      try {
        principal = await this.#authenticate({
          kind: "connect",
          token: bearerToken(headers, url),
          url,
          headers,
          protocols: [protocol],
        });
      } catch (error) {
        transport.close(CloseCode.UNAUTHORIZED, "unauthorized");
        throw new ConnectRefusedError({ cause: error });
      }
      const expiresAt = expiryOf(principal);
      if (expiresAt !== undefined && expiresAt <= this.#core.clock.now()) {
        transport.close(CloseCode.UNAUTHORIZED, "unauthorized");
        throw new ConnectRefusedError();
      }
    }
    this.#open(transport, { protocol, principal, trusted: !this.#authenticate, url });
  }

  /**
   * Serves a transport whose connection state was kept with it ({@linkcode ConnectionSnapshot},
   * from `onConnectionChange`): an edge harness that was evicted while its WebSocket lived on
   * takes it back registered, bound to its executor, its token and lease deadlines as they were.
   * No `authenticate` runs again (the snapshot holds the principal it returned).
   */
  async restore(transport: Transport, snapshot: ConnectionSnapshot): Promise<void> {
    if (this.#closed) {
      transport.close(CloseCode.GOING_AWAY, "harness shutting down");
      throw new HarnessClosedError();
    }
    await this.#core.restore(transport, snapshot);
  }

  /**
   * Closes the harness: servers stop, executors are told to reconnect elsewhere (1001), their
   * sessions end here and pending tool calls fail with `ToolOutcomeUnknownError` — in this
   * process only: the store keeps them, and a harness started on it takes them up.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const readiness = this.#core.readiness;
    if (readiness === "standby" || readiness === "starting") this.#closedBeforeServing = true;
    const servers = [...this.#servers];
    this.#servers.clear();
    const links = [...this.#links];
    this.#links.clear();
    // Their connections close with the others below (1001): executors keep their sessions.
    for (const link of links) link.release();
    // Releases the executors: the tool calls a brain waits for over HTTP fail (harness_closed),
    // and its requests answer 503 `harness_closed` ...
    const closing = this.#core.close();
    for (const onClose of [...this.#closeWaiters]) onClose();
    // ... before the servers close their connections, which would cut them unanswered.
    await this.#answered();
    await Promise.all([closing, ...servers.map((s) => s.close())]);
  }

  /**
   * Resolves once the requests being answered now have their answers (at most
   * {@linkcode ANSWER_GRACE_MS}), and the servers had a task to write them out.
   */
  async #answered(): Promise<void> {
    if (this.#answering.size === 0) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, ANSWER_GRACE_MS)));
    const answers = [...this.#answering].map((answer) => answer.then(settled, settled));
    await Promise.race([Promise.all(answers), grace]);
    clearTimeout(timer);
    await new Promise<void>((resolve) => setTimeout(resolve, 0));
  }

  /** Answers `request` with `handler`, known to a close until it has its answer. */
  #answer(
    handler: (request: Request) => Response | Promise<Response>,
    request: Request,
  ): Promise<Response> {
    const answer = Promise.resolve(handler(request));
    const answering = this.#answering;
    answering.add(answer);
    const done = () => void answering.delete(answer);
    answer.then(done, done);
    return answer;
  }

  /** Closes the harness as {@linkcode close} does: `await using harness = new Harness(…)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  async #listen(
    where: { hostname?: string; port?: number; path?: string },
    fetch: ((request: Request) => Response | Promise<Response>) | undefined,
  ): Promise<HarnessServer> {
    if (this.#closed) throw new HarnessClosedError();
    const factory = this.#serverFactory;
    if (!factory) throw new NoServerFactoryError();
    const server = await factory({
      ...where,
      ...(this.#maxFrameBytes !== undefined ? { maxFrameBytes: this.#maxFrameBytes } : {}),
      ...(this.#handshakeTimeoutMs !== undefined
        ? { handshakeTimeoutMs: this.#handshakeTimeoutMs }
        : {}),
      upgrade: (request, protocols) => this.upgrade(request, protocols),
      // A request that names no URL is the caller's error, answered as every face answers one.
      badRequest: (reason) => apiErrorAnswer(new ApiError(400, "bad_request", reason)),
      fetch: (request) => this.#answer(fetch ?? ((r) => this.fetch(r)), request),
    });
    this.#servers.add(server);
    const close = async () => {
      this.#servers.delete(server);
      await server.close();
    };
    return { url: server.url, httpUrl: server.httpUrl, close, [Symbol.asyncDispose]: close };
  }

  async #admit(request: Request, protocols: readonly string[]): Promise<Admitted | Response> {
    const url = new URL(request.url);
    const core = this.#core;
    if (this.#closed) return jsonAnswer(503, { error: "unavailable" });
    if (!CONNECT_PATHS.includes(url.pathname)) return jsonAnswer(404, { error: "not_found" });
    const fromPage = browserAnswer(request, !this.#authenticate);
    if (fromPage) return fromPage;
    const readiness = core.readiness;
    if (standsAside(readiness) || readiness === "draining") {
      // Sent elsewhere: a load balancer tries the harness that holds the store.
      return jsonAnswer(503, { error: readiness }, { "retry-after": "1" });
    }
    const protocol = PROTOCOLS.find((p) => protocols.includes(p));
    if (!protocol) return jsonAnswer(400, { error: "unsupported_subprotocol" });
    if (core.unregistered >= this.#maxUnregisteredConnections) {
      const fields = this.#crowdedUpgrades.pass({ limit: this.#maxUnregisteredConnections });
      if (fields) {
        core.logger.warn("upgrade refused: too many connections not registered yet", fields);
      }
      return jsonAnswer(503, { error: "unavailable" }, { "retry-after": "1" });
    }
    let principal: Principal = NO_PRINCIPAL;
    if (this.#authenticate) {
      // An upgrade being authenticated counts as a connection not registered yet.
      core.unregistered++;
      try {
        principal = await this.#authenticate({
          kind: "connect",
          token: bearerToken(request.headers, url),
          url,
          headers: request.headers,
          protocols,
        });
      } catch {
        const fields = this.#refusedUpgrades.pass({ path: url.pathname });
        if (fields) core.logger.info("connection refused before upgrade", fields);
        return jsonAnswer(401, { error: "unauthorized" });
      } finally {
        core.unregistered--;
      }
      const expiresAt = expiryOf(principal);
      if (expiresAt !== undefined && expiresAt <= core.clock.now()) {
        return jsonAnswer(401, { error: "unauthorized" });
      }
    }
    return { protocol, principal, trusted: !this.#authenticate, url };
  }

  async #connectViaFetch(request: Request, options: FetchOptions): Promise<Response> {
    if (!isUpgradeRequest(request)) return jsonAnswer(426, { error: "upgrade_required" });
    const admitted = await this.#admit(request, offeredProtocols(request));
    if (admitted instanceof Response) return admitted;
    if (!options.upgrade) return jsonAnswer(426, { error: "upgrade_required" });
    const { socket, response } = options.upgrade(request, admitted.protocol);
    const transport = webSocketTransport(socket, {
      protocol: admitted.protocol,
      maxFrameBytes: this.#maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
    });
    // A server-side socket from an upgrade opens after the 101 response has gone out.
    if (socket.readyState === 0) {
      (socket as unknown as EventTarget).addEventListener(
        "open",
        () => this.#open(transport, admitted),
        { once: true },
      );
    } else this.#open(transport, admitted);
    return response;
  }

  #open(transport: Transport, admitted: Admitted): void {
    if (this.#closed) {
      transport.close(CloseCode.GOING_AWAY, "harness shutting down");
      return;
    }
    this.#core.open(transport, admitted);
  }
}

function settled(): void {}
