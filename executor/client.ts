/**
 * `ExecutorClient`: the executor end of the protocol. It dials out to a harness, registers what
 * it serves, keeps its lease and token alive, reconnects with resume, holds sessions, runs tool
 * calls and delivers their results and its durable events exactly once across reconnects.
 *
 * Portable: the dialer and fetch are injected (`executor/node.ts` preconfigures the Node dialer).
 */
import { type Clock, systemClock } from "../protocol/clock.ts";
import { LocalError } from "../protocol/errors.ts";
import {
  type Artifact,
  type Capabilities,
  type ExecutorInfo,
  type ExecutorNotificationMethod,
  type ExecutorRegisterParams,
  type ExecutorRegisterResult,
  type ExecutorRequestMethod,
  type HarnessNotificationMethod,
  type HarnessRequestMethod,
  type NotificationMap,
  PROTOCOLS,
  type ProtocolVersion,
  type RequestMap,
  type SessionAssignParams,
  type SessionAssignResult,
  type SessionEventParams,
  type SessionStatus,
  type SessionStopParams,
  type SessionStopResult,
  TOOL_SPECS,
  type ToolResultParams,
} from "../protocol/generated/contract.ts";
import {
  CapabilityMissingError,
  ProtocolMismatchError,
  ResourceExhaustedError,
  UnavailableError,
} from "../protocol/generated/errors.ts";
import { type Logger, silentLogger } from "../protocol/logger.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  type Disposable,
  type NotificationHandler,
  Peer,
  type RequestContext,
  type RequestHandler,
} from "../protocol/peer.ts";
import type { CloseInfo, Dialer, Transport } from "../transport/transport.ts";
import {
  isLocalSocketUrl,
  localSocketPath,
  type RunningServer,
  type WebSocketServe,
} from "../transport/server.ts";
import { type ArtifactUpload, ArtifactUploader } from "./artifacts.ts";
import { computeCapabilities, sameCapabilities } from "./capabilities.ts";
import {
  type ClientState,
  type Connection,
  ConnectionLoop,
  displayUrl,
  type ExecutorClosedInfo,
} from "./connection-loop.ts";
import {
  createCredentials,
  type Credentials,
  type ExecutorToken,
  type FetchFunction,
  LOCAL_ENVIRONMENT_ID,
  normalizeBaseUrl,
  type SocketFetch,
  type TokenSource,
} from "./credentials.ts";
import {
  ClientStoppedError,
  ExecutorConfigError,
  NotConnectedError,
  UnknownSessionError,
} from "./errors.ts";
import { EventOutbox } from "./event-outbox.ts";
import { type ExecutorExtensionHost, withContributions } from "./extension.ts";
import { type ExecutorListener, InboundConnections } from "./listener.ts";
import { Lease } from "./lease.ts";
import {
  type ConnectionLink,
  deliver,
  ResultOutbox,
  type ToolResultLostHandler,
} from "./result-outbox.ts";
import { SecretScrubber } from "./secrets.ts";
import { type ExecutorSession, SessionTable } from "./sessions.ts";
import { type BackoffPolicy, type Deferred, deferred, describeError, sleep } from "./timing.ts";
import { ToolCallRunner } from "./tool-calls.ts";
import { INLINE_RESULT_BYTES } from "./tool-results.ts";
import {
  type ServedTool,
  type ToolInputSchema,
  type ToolOutputSchema,
  ToolRegistry,
  type ToolSlot,
  type ToolSlots,
  type TypedToolDefinition,
  type TypedToolHandler,
} from "./tool-slots.ts";
import { TokenRefresher } from "./token-refresher.ts";
import { randomHex } from "../protocol/ids.ts";

/** Options of {@linkcode ExecutorClient}. */
export interface ExecutorClientOptions {
  /**
   * The deployment origin: the token exchange posts to `{baseUrl}/v1/...` (a trailing `/api/v1`
   * is dropped), and artifacts are uploaded there.
   */
  baseUrl?: string;
  /** Environment credential (with `environmentId`). */
  environmentKey?: string;
  /** The environment the executor serves. */
  environmentId?: string;
  /** Machine credential (with `machineId`); the executor id is `exec_<machineId>`. */
  machineToken?: string;
  /** The machine the token belongs to. */
  machineId?: string;
  /** Your own credential: returns a fresh token with its channel URL on every call. */
  tokenSource?: TokenSource;
  /**
   * A local harness (`ws://`, `wss://`, `unix:///path.sock`) reached without token exchange; or,
   * with a credential, the URL to dial instead of the one the token endpoint names. Without
   * `environmentId` or `machineId`, a local executor registers in environment `"local"`.
   */
  harnessUrl?: string;
  /** What the executor is. */
  executor: ExecutorInfo;
  /** Most sessions held at once; beyond it `session.assign` gets -32009. */
  maxSessions?: number;
  /**
   * Capabilities to advertise besides those derived from handlers, e.g.
   * `{ shell: { enabled: false } }` to withdraw bash, or `{ mcp: { servers: ["echo"] } }`.
   */
  capabilities?: Capabilities;
  /** Where diagnostics go (secrets are redacted). Default: nowhere. */
  logger?: Logger;
  /** Time and timers: heartbeats, backoff, token refresh, retries, grace periods. */
  clock?: Clock;
  /** Randomness for backoff jitter, 0 ≤ x < 1. Default `Math.random`. */
  random?: () => number;
  /** Opens connections. Required here; `executor/node.ts` provides the Node default. */
  dial?: Dialer;
  /**
   * Serves the local socket of {@linkcode ExecutorClient.listen} (the brain dials the
   * executor). The runtime presets (`executor/node.ts`, `deno.ts`, `bun.ts`) provide it.
   */
  server?: WebSocketServe;
  /** HTTP for token exchange and artifact upload. Default: the global `fetch`. */
  fetch?: FetchFunction;
  /**
   * HTTP over a local socket, for a `harnessUrl` of `unix:///path.sock`: artifacts are uploaded
   * to that harness through its socket. The runtime presets (`executor/node.ts`, `deno.ts`,
   * `bun.ts`) provide it; without it such an executor uploads nothing (results keep their
   * preview).
   */
  socketFetch?: SocketFetch;
  /** Reconnect backoff. Default 250 ms doubling to 30 s, jitter 0.5. */
  reconnect?: BackoffPolicy;
  /** Backoff of retried deliveries (`tool.result`, `session.ended`, events). Default 250 ms to 10 s. */
  retry?: BackoffPolicy;
  /** Refresh the JWT this long before it expires. Default 60 s. */
  tokenRefreshLeadMs?: number;
  /** Timeout of each request the client sends. Default 30 s. */
  requestTimeoutMs?: number;
  /** Frame size limit. Default 16 MiB. */
  maxFrameBytes?: number;
  /** Time between SIGTERM and SIGKILL for a session's cleanup, unless `session.stop` says. Default 5 s. */
  sessionGraceMs?: number;
  /** How long cleanup may outlast the grace period before the session ends anyway. Default 5 s. */
  cleanupTimeoutMs?: number;
  /**
   * Durable events of one session (without `sequence`) in flight at once. Default 1: above it,
   * a harness that refuses one event but accepts the next holds them out of order. Sequenced
   * (agent) events are always pipelined: the harness's gap check keeps their order.
   */
  eventWindow?: number;
  /** Inline limit of bash output. Default {@linkcode INLINE_RESULT_BYTES}. */
  inlineResultBytes?: number;
  /** Called with each tool result the client gave up on. */
  onToolResultLost?: ToolResultLostHandler;
}

/** Decides on a `session.assign`: return to accept, throw (e.g. `ResourceExhaustedError`) to refuse. */
export type SessionAssignHandler = (
  session: ExecutorSession,
  params: SessionAssignParams,
) => void | Promise<void>;

/** Runs when the harness stops a session, before its cleanup hooks. */
export type SessionStopHandler = (
  session: ExecutorSession,
  params: SessionStopParams,
) => void | Promise<void>;

/** Why the executor is draining. */
export interface DrainInfo {
  /** A heartbeat result said `drain: true`, or the harness sent `executor.drain`. */
  readonly source: "heartbeat" | "request";
  /** The harness's reason, when it gave one. */
  readonly reason?: string;
  /** How long current work may take before the harness stops it. */
  readonly deadlineMs?: number;
}

/** Runs once when draining begins. */
export type DrainHandler = (info: DrainInfo) => void | Promise<void>;

/** Per-call options of {@linkcode ExecutorClient.call}. */
export interface ExecutorCallOptions {
  /** Aborts waiting (for a connection, or for the answer). */
  signal?: AbortSignal;
  /** Timeout of one attempt, in ms. */
  timeoutMs?: number;
}

/** Options of {@linkcode ExecutorClient.stop}. */
export interface StopOptions {
  /** Sent in `executor.close`. Default `"shutdown"`. */
  reason?: string;
  /**
   * Let running tool calls finish and pending results and events reach the harness for up to
   * this long before stopping. Default 0: stop at once (running calls are aborted). A later
   * `stop()` with no grace (a second Ctrl-C) ends a grace period still running.
   */
  graceMs?: number;
}

/** Methods the client serves or sends itself. */
const MANAGED_REQUESTS: ReadonlySet<string> = new Set([
  "session.assign",
  "session.stop",
  "tool.call",
  "tool.cancel",
  "executor.drain",
]);
const MANAGED_CALLS: ReadonlySet<string> = new Set([
  "executor.register",
  "executor.heartbeat",
  "executor.token.refresh",
]);
/** Requests delivered until accepted: idempotent on the harness. */
const DELIVERED_CALLS: ReadonlySet<string> = new Set([
  "tool.result",
  "session.ready",
  "session.ended",
]);

interface ClientConnection extends Connection {
  readonly resumeSent: string[] | undefined;
  advertised: Capabilities;
  lease?: Lease;
  refresher?: TokenRefresher;
}

/** The executor end of the BMA Executor Protocol. */
export class ExecutorClient {
  /** The typed slots of the built-in tools: `client.tools.bash.handle(...)`. */
  readonly tools: ToolSlots;
  /** Settles (never rejects) when the client has stopped for good, with the reason. */
  readonly closed: Promise<ExecutorClosedInfo>;

  readonly #options: ExecutorClientOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #logger: Logger;
  readonly #scrubber: SecretScrubber;
  readonly #credentials: Credentials;
  readonly #dial: Dialer | undefined;
  readonly #registry: ToolRegistry;
  readonly #sessions: SessionTable;
  readonly #events: EventOutbox;
  readonly #results: ResultOutbox;
  readonly #calls: ToolCallRunner;
  readonly #artifacts: ArtifactUploader;
  readonly #link: ConnectionLink;
  readonly #requestTimeoutMs: number;
  readonly #maxFrameBytes: number;
  readonly #sessionGraceMs: number;
  readonly #retry: BackoffPolicy;
  readonly #requestHandlers = new Map<string, (params: unknown, ctx: RequestContext) => unknown>();
  readonly #notificationHandlers = new Map<string, (params: unknown) => unknown>();
  readonly #assignHandlers = new Set<SessionAssignHandler>();
  readonly #stopHandlers = new Set<SessionStopHandler>();
  readonly #drainHandlers = new Set<DrainHandler>();
  readonly #lostHandlers = new Set<ToolResultLostHandler>();
  readonly #stateHandlers = new Set<(state: ClientState) => void>();
  /** Capabilities added by capability modules (the agent capability's `max_sessions`). */
  readonly #contributions = new Set<() => Capabilities>();
  readonly #connectionWaiters = new Set<Deferred<Peer>>();
  readonly #closed = deferred<ExecutorClosedInfo>();
  /** What `extend` hands a capability built on top of the client. */
  readonly #extensionHost: ExecutorExtensionHost;
  #loop: ConnectionLoop | undefined;
  #connection: ClientConnection | undefined;
  #started: Promise<ExecutorRegisterResult> | undefined;
  #stopping: Promise<ExecutorClosedInfo> | undefined;
  /** Ends the grace period of a stop still waiting for current work. */
  #graceCut: AbortController | undefined;
  #executorId: string | undefined;
  #token: ExecutorToken | undefined;
  #draining = false;
  #state: ClientState = "idle";
  /** Set when constructed without a credential: only `listen()` can work. */
  #missingCredential: ExecutorConfigError | undefined;
  #listening: { server: RunningServer; inbound: InboundConnections } | undefined;

  /**
   * Checks the options (throws {@linkcode ExecutorConfigError}); nothing connects before `start()`
   * or `listen()`.
   */
  constructor(options: ExecutorClientOptions) {
    if (!options || typeof options !== "object") {
      throw new ExecutorConfigError("ExecutorClient needs options");
    }
    const info = options.executor;
    if (!info || !info.name || !info.os || !info.arch || !info.version) {
      throw new ExecutorConfigError("executor needs name, os, arch and version");
    }
    if (
      options.maxSessions !== undefined &&
      (!Number.isInteger(options.maxSessions) || options.maxSessions < 1)
    ) {
      throw new ExecutorConfigError("maxSessions must be a positive integer");
    }
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? Math.random;
    this.#scrubber = new SecretScrubber([options.environmentKey, options.machineToken]);
    this.#logger = this.#scrubber.logger(options.logger ?? silentLogger);
    this.#credentials = this.#createCredentials(options);
    this.#dial = options.dial;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.#sessionGraceMs = options.sessionGraceMs ?? 5_000;
    this.#retry = options.retry ?? { initialDelayMs: 250, maxDelayMs: 10_000 };
    this.closed = this.#closed.promise;
    if (options.onToolResultLost) this.#lostHandlers.add(options.onToolResultLost);

    this.#registry = new ToolRegistry(() => this.#capabilitiesChanged());
    this.tools = this.#registry.slots;
    this.#link = {
      whenConnected: (signal) => this.#whenConnected(signal),
      connected: () => {
        const connection = this.#connection;
        return connection && !connection.peer.isClosed ? connection.peer : undefined;
      },
    };
    this.#artifacts = new ArtifactUploader({
      baseUrl: this.#credentials.baseUrl,
      environmentId: this.#credentials.environmentId,
      // A harness on a local socket is reached through that socket.
      fetch: this.#credentials.fetch ?? options.fetch,
      token: (signal) => this.#currentToken(signal),
      scrubber: this.#scrubber,
    });
    this.#events = new EventOutbox({
      clock: this.#clock,
      logger: this.#logger,
      idPrefix: `ev_${randomHex(8)}_`,
      window: Math.max(1, options.eventWindow ?? 1),
      requestTimeoutMs: this.#requestTimeoutMs,
      retry: this.#retry,
      random: this.#random,
    });
    this.#results = new ResultOutbox({
      link: this.#link,
      clock: this.#clock,
      random: this.#random,
      retry: this.#retry,
      timeoutMs: this.#requestTimeoutMs,
      logger: this.#logger,
      onLost: (result, error) => this.#resultLost(result, error),
    });
    this.#sessions = new SessionTable({
      clock: this.#clock,
      logger: this.#logger,
      cleanupTimeoutMs: options.cleanupTimeoutMs ?? 5_000,
      callsSettled: (id) => this.#calls.settled(id),
      eventsIdle: (id) => this.#events.idle(id),
      sendEnded: (id, reason) => this.#sendEnded(id, reason),
    });
    this.#calls = new ToolCallRunner({
      clock: this.#clock,
      logger: this.#logger,
      callLog: options.logger && options.logger !== silentLogger ? this.#logger : undefined,
      scrubber: this.#scrubber,
      sessions: this.#sessions,
      results: this.#results,
      servedTool: (tool) => this.#servedTool(tool),
      notifyProgress: (params) => this.notify("tool.progress", params),
      upload: this.#artifacts.available ? (upload) => this.uploadArtifact(upload) : undefined,
      inlineBytes: options.inlineResultBytes ?? INLINE_RESULT_BYTES,
      endOneShot: (session) => {
        void this.#sessions.end(session, {
          reason: "one_shot_done",
          graceMs: this.#sessionGraceMs,
          notify: true,
        });
      },
    });
    this.#extensionHost = {
      clock: this.#clock,
      logger: this.#logger,
      random: this.#random,
      retry: this.#retry,
      requestTimeoutMs: this.#requestTimeoutMs,
      maxFrameBytes: this.#maxFrameBytes,
      openSession: (sessionId) => {
        const session = this.#sessions.add({
          session_id: sessionId,
          metadata: { source: "harness" },
        });
        this.#sessions.markAccepted(session);
        this.#sessions.markReady(session);
        return session;
      },
      endSession: (session, reason, notify) =>
        this.#sessions.end(session, { reason, graceMs: this.#sessionGraceMs, notify }),
      contributeCapabilities: (source) => {
        this.#contributions.add(source);
        this.#capabilitiesChanged();
        return {
          dispose: () => {
            if (this.#contributions.delete(source)) this.#capabilitiesChanged();
          },
        };
      },
      addSecret: (secret) => this.#scrubber.add(secret),
      scrub: (text) => this.#scrubber.scrub(text),
    };
  }

  /**
   * The credentials from the options. Without any credential the client can still `listen()`
   * (a dialing harness needs none), so the error is kept for `start()` instead of thrown.
   */
  #createCredentials(options: ExecutorClientOptions): Credentials {
    const deps = { fetch: options.fetch, clock: this.#clock, scrubber: this.#scrubber };
    const none = options.tokenSource === undefined && options.machineToken === undefined &&
      options.environmentKey === undefined && !options.harnessUrl;
    if (!none) return createCredentials(options, deps);
    try {
      return createCredentials(options, deps);
    } catch (error) {
      if (!(error instanceof ExecutorConfigError)) throw error;
      this.#missingCredential = error;
      return {
        scope: "local",
        environmentId: options.environmentId ?? (options.machineId ? "" : LOCAL_ENVIRONMENT_ID),
        machineId: options.machineId,
        baseUrl: options.baseUrl ? normalizeBaseUrl(options.baseUrl) : undefined,
        refreshable: false,
        fetchToken: () => Promise.reject(error),
      };
    }
  }

  // ---- state ---------------------------------------------------------------------------------

  /** Where the client is: idle, connecting, connected, waiting (backoff), stopping, stopped. */
  get state(): ClientState {
    return this.#state;
  }

  /** Whether a registered connection is up. */
  get connected(): boolean {
    return this.#connection !== undefined && !this.#connection.peer.isClosed;
  }

  /** The executor id the harness assigned at the first registration. */
  get executorId(): string | undefined {
    return this.#executorId;
  }

  /** Whether the executor is draining (refusing new sessions). */
  get draining(): boolean {
    return this.#draining;
  }

  /** The capabilities the executor advertises now. */
  get capabilities(): Capabilities {
    return this.#computeCapabilities();
  }

  /** The sessions held. */
  get sessions(): ExecutorSession[] {
    return this.#sessions.all();
  }

  /** The session with this id, if held. */
  session(sessionId: string): ExecutorSession | undefined {
    return this.#sessions.get(sessionId);
  }

  /** Observes state changes (e.g. to show connectivity). */
  onStateChange(handler: (state: ClientState) => void): Disposable {
    this.#stateHandlers.add(handler);
    return { dispose: () => void this.#stateHandlers.delete(handler) };
  }

  // ---- registration of handlers --------------------------------------------------------------

  /**
   * Serves a tool of your own, defined by zod schemas, and advertises it with its description
   * and JSON Schemas (`capabilities.tool_definitions`; after `start()` through
   * `executor.capabilities.update`). The handler's input type is the input schema's output, its
   * return type the output schema's input:
   *
   * ```ts
   * client.tool("weather", {
   *   description: "Current weather of a city",
   *   input: z.object({ city: z.string().min(1), days: z.int().min(1).default(1) }),
   *   output: z.object({ celsius: z.number() }),
   * }, ({ city, days }) => ({ celsius: forecast(city, days) }));
   * ```
   *
   * A call whose input the schema refuses is answered -32602 before the ack, and the handler
   * never runs; the handler's result is parsed with `output` and sent as `structured_content`.
   * Replaces any earlier handler of the name; disposing the registration withdraws the tool.
   * Throws `ExecutorConfigError` for a built-in tool's name (serve those with `client.tools`)
   * or a schema without a JSON Schema.
   */
  tool<I extends ToolInputSchema, O extends ToolOutputSchema | undefined = undefined>(
    name: string,
    definition: TypedToolDefinition<I, O>,
    handler: TypedToolHandler<I, NoInfer<O>>,
  ): Disposable;
  /**
   * The slot of any tool by name: a built-in's typed slot, or an untyped one for your own tool
   * (served without a schema: its input is not checked, and nothing but its name is advertised).
   */
  tool(name: string): ToolSlot<Record<string, unknown>, unknown>;
  tool(
    name: string,
    definition?: unknown,
    handler?: unknown,
  ): Disposable | ToolSlot<Record<string, unknown>, unknown> {
    if (definition === undefined && handler === undefined) return this.#registry.slot(name);
    return this.#registry.define(name, definition, handler);
  }

  /** Decides on assigned sessions (default: accept). Throw a `ProtocolError` to refuse. */
  onSessionAssign(handler: SessionAssignHandler): Disposable {
    this.#assignHandlers.add(handler);
    return { dispose: () => void this.#assignHandlers.delete(handler) };
  }

  /** Runs when the harness stops a session, before its cleanup hooks and `session.ended`. */
  onSessionStop(handler: SessionStopHandler): Disposable {
    this.#stopHandlers.add(handler);
    return { dispose: () => void this.#stopHandlers.delete(handler) };
  }

  /** Runs once when the executor starts draining. */
  onDrain(handler: DrainHandler): Disposable {
    this.#drainHandlers.add(handler);
    return { dispose: () => void this.#drainHandlers.delete(handler) };
  }

  /** Receives each tool result the client gave up on (a final refusal, or the client stopped). */
  onToolResultLost(handler: ToolResultLostHandler): Disposable {
    this.#lostHandlers.add(handler);
    return { dispose: () => void this.#lostHandlers.delete(handler) };
  }

  /**
   * Serves a capability request (`process.*`, `terminal.*`, `skill.install`, `file.*`,
   * `git.credentials`, `workspace.backup`, `mcp.*`, `fs.*`, agent methods), typed by the
   * contract. Serving it advertises its capability; after `start()` the change is published.
   */
  onRequest<M extends HarnessRequestMethod>(method: M, handler: RequestHandler<M>): Disposable {
    if (MANAGED_REQUESTS.has(method)) {
      throw new ExecutorConfigError(
        `${method} is served by the client itself (use the tool slots and session handlers)`,
      );
    }
    const stored = handler as unknown as (params: unknown, ctx: RequestContext) => unknown;
    this.#requestHandlers.set(method, stored);
    this.#installRequest(method);
    this.#capabilitiesChanged();
    return {
      dispose: () => {
        if (this.#requestHandlers.get(method) !== stored) return;
        this.#requestHandlers.delete(method);
        this.#capabilitiesChanged();
      },
    };
  }

  /**
   * The client's extension seam: calls `install` with what a capability built on top of the
   * client needs of it besides the public API ({@linkcode ExecutorExtensionHost}), and returns
   * what it returns. The agent capability plugs in here: `serveAgent(client, handler, options)`
   * from `bma-executor-sdk/agent`.
   */
  extend<T>(install: (host: ExecutorExtensionHost) => T): T {
    return install(this.#extensionHost);
  }

  /** Receives a notification from the harness (`mcp.message`). */
  onNotification<M extends HarnessNotificationMethod>(
    method: M,
    handler: NotificationHandler<M>,
  ): Disposable {
    if (method === "executor.close") {
      throw new ExecutorConfigError("executor.close is handled by the client (see closed)");
    }
    const stored = handler as unknown as (params: unknown) => unknown;
    this.#notificationHandlers.set(method, stored);
    this.#installNotification(method);
    return {
      dispose: () => {
        if (this.#notificationHandlers.get(method) === stored) {
          this.#notificationHandlers.delete(method);
        }
      },
    };
  }

  // ---- sending -------------------------------------------------------------------------------

  /**
   * Sends a request to the harness, typed by the contract.
   *
   * - `session.event` is durable: kept until acknowledged and resent after reconnects (resolves
   *   with the acknowledgement).
   * - `tool.result`, `session.ready` and `session.ended` are delivered until accepted.
   * - Anything else waits for a connection and is sent once.
   */
  call<M extends ExecutorRequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    options: ExecutorCallOptions = {},
  ): Promise<RequestMap[M]["result"]> {
    if (MANAGED_CALLS.has(method)) {
      return Promise.reject(new LocalError(`${method} is sent by the client itself`));
    }
    if (this.#stopping) return Promise.reject(new ClientStoppedError());
    if (method === "session.event") {
      return this.#events.enqueue(params as SessionEventParams) as Promise<
        RequestMap[M]["result"]
      >;
    }
    if (DELIVERED_CALLS.has(method)) {
      return deliver(this.#link, method, params, {
        clock: this.#clock,
        random: this.#random,
        retry: this.#retry,
        timeoutMs: options.timeoutMs ?? this.#requestTimeoutMs,
        signal: options.signal,
      });
    }
    return this.#whenConnected(options.signal).then((peer) =>
      peer.call(method, params, {
        signal: options.signal,
        timeoutMs: options.timeoutMs ?? this.#requestTimeoutMs,
      })
    );
  }

  /**
   * Sends a notification; throws {@linkcode NotConnectedError} while disconnected. Returns false
   * when a lossy one (`terminal.output`, `process.output`, `tool.progress`,
   * `session.event_delta`) was dropped because the harness reads slower than it is sent to.
   */
  notify<M extends ExecutorNotificationMethod>(method: M, params: NotificationMap[M]): boolean {
    if (method === "executor.close" || method === "executor.capabilities.update") {
      throw new LocalError(`${method} is sent by the client itself`);
    }
    const connection = this.#connection;
    if (!connection || connection.peer.isClosed) throw new NotConnectedError(method);
    try {
      return connection.peer.notify(method, params);
    } catch (error) {
      if ((error as Error)?.name === "ConnectionClosedError") throw new NotConnectedError(method);
      throw error;
    }
  }

  /**
   * Whether the link to the harness holds more than the peer's `maxBufferedBytes` unsent (a
   * harness reading slower than this executor sends); false while not connected. A producer of
   * what must not be lost waits while it is true.
   */
  get congested(): boolean {
    const connection = this.#connection;
    return connection !== undefined && !connection.peer.isClosed && connection.peer.congested;
  }

  /** Reports a session ready after its set-up (`session.ready`, delivered until accepted). */
  async sessionReady(sessionId: string): Promise<void> {
    const session = this.#sessions.get(sessionId);
    if (!session) throw new UnknownSessionError(sessionId);
    await this.#sessions.accepted(session);
    await deliver(this.#link, "session.ready", { session_id: sessionId }, this.#delivery());
    this.#sessions.markReady(session);
  }

  /** Reports a session's status (`session.status`, lossy): `detail` is free-form context. */
  sessionStatus(sessionId: string, status: SessionStatus, detail?: string): void {
    this.notify("session.status", {
      session_id: sessionId,
      status,
      ...(detail === undefined ? {} : { detail }),
    });
  }

  /**
   * Ends a session from this side: aborts its tool calls, runs its cleanup hooks, delivers its
   * events, then sends `session.ended` until accepted.
   */
  async sessionEnded(sessionId: string, reason = "ended"): Promise<void> {
    const session = this.#sessions.get(sessionId);
    if (!session) throw new UnknownSessionError(sessionId);
    await this.#sessions.end(session, { reason, graceMs: this.#sessionGraceMs, notify: true });
  }

  /** Uploads an artifact (POST /v1/environments/{environment_id}/artifacts, legacy alias). */
  uploadArtifact(upload: ArtifactUpload): Promise<Artifact> {
    return this.#artifacts.upload(upload);
  }

  // ---- life cycle ----------------------------------------------------------------------------

  /**
   * Connects and registers; resolves with the registration once registered. Transient failures
   * are retried with backoff meanwhile. Rejects with the contract's error when the harness
   * refuses the registration (-32010 `ProtocolMismatchError`, -32012 `CapabilityMissingError`
   * with `data.reason` and `data.capability`), `CredentialRejectedError` when the token endpoint
   * refuses the credential, `ConnectionRefusedError` for a refused upgrade, or
   * `ClientStoppedError` when stopped first.
   */
  start(): Promise<ExecutorRegisterResult> {
    if (this.#stopping) return Promise.reject(new ClientStoppedError());
    if (this.#started) return this.#started;
    if (this.#missingCredential) return Promise.reject(this.#missingCredential);
    if (!this.#dial) {
      return Promise.reject(
        new ExecutorConfigError(
          "no dialer: pass the dial option, or import ExecutorClient from executor/node.ts",
        ),
      );
    }
    return this.#run(this.#credentials, this.#dial);
  }

  /**
   * Listens on a local socket (`unix:///path.sock`, or a Windows named pipe `\\.\pipe\name`)
   * for a harness to dial in, instead of dialing out: the brain dials the executor (seed 003).
   * Resolves once listening. Each accepted connection speaks the same protocol as a dialed one:
   * the executor picks the subprotocol from the harness's offer and sends `executor.register`
   * first; when the connection ends, the next dial-in is served with `resume`. One harness
   * connection at a time (another dial meanwhile gets HTTP 409). No credential is needed, and
   * none is checked: the socket's file permissions decide who may connect. `stop()` closes the
   * socket.
   */
  async listen(url: string): Promise<ExecutorListener> {
    if (this.#stopping) throw new ClientStoppedError();
    if (this.#started) throw new ExecutorConfigError("the client is already started");
    if (!isLocalSocketUrl(url)) {
      throw new ExecutorConfigError("listen takes unix:///path.sock or \\\\.\\pipe\\name");
    }
    const serve = this.#options.server;
    if (!serve) {
      throw new ExecutorConfigError(
        "no server: pass the server option, or import ExecutorClient from a runtime entry point",
      );
    }
    const inbound = new InboundConnections();
    // Claimed before the first await, so a concurrent start() or listen() is refused.
    const claim = deferred<ExecutorRegisterResult>();
    claim.promise.catch(() => {});
    this.#started = claim.promise;
    let server: RunningServer;
    try {
      server = await serve({
        path: localSocketPath(url),
        maxFrameBytes: this.#maxFrameBytes,
        upgrade: (request, protocols) => inbound.upgrade(request, protocols),
      });
    } catch (error) {
      this.#started = undefined;
      throw error;
    }
    this.#listening = { server, inbound };
    const local: Credentials = {
      scope: "local",
      environmentId: this.#credentials.environmentId,
      machineId: this.#credentials.machineId,
      baseUrl: this.#credentials.baseUrl,
      refreshable: false,
      fetchToken: () => Promise.resolve({ url: server.url }),
    };
    if (this.#stopping) {
      inbound.close();
      await server.close();
      throw new ClientStoppedError();
    }
    this.#run(local, inbound.dial).then(claim.resolve, claim.reject);
    return { url: server.url, registered: claim.promise };
  }

  #run(credentials: Credentials, dial: Dialer): Promise<ExecutorRegisterResult> {
    const loop = new ConnectionLoop({
      clock: this.#clock,
      logger: this.#logger,
      random: this.#random,
      backoff: this.#options.reconnect ?? {},
      credentials,
      dial,
      maxFrameBytes: this.#maxFrameBytes,
      register: (transport, token, signal) => this.#register(transport, token, signal),
      onConnected: (connection) => this.#connected(connection as ClientConnection),
      onDisconnected: (connection, info) =>
        this.#disconnected(connection as ClientConnection, info),
      onState: (state) => this.#setState(state),
    });
    this.#loop = loop;
    loop.finished.then((info) => {
      if (!this.#stopping) this.#stopping = this.#shutdown(info, {});
    });
    this.#started = loop.start().then((connection) => connection.registration);
    return this.#started;
  }

  /**
   * Stops for good: refuses new work, optionally lets current work finish (`graceMs`), aborts
   * what still runs, runs the sessions' cleanup hooks, sends `executor.close` and closes with
   * 1000. Results not delivered by then go to `onToolResultLost`. Calling it again returns the
   * same promise, and without `graceMs` cuts a grace period still running short.
   */
  stop(options: StopOptions = {}): Promise<ExecutorClosedInfo> {
    if (!this.#stopping) this.#stopping = this.#shutdown({ reason: "stopped" }, options);
    else if (!options.graceMs) this.#graceCut?.abort();
    return this.#stopping;
  }

  // ---- connection ----------------------------------------------------------------------------

  async #register(
    transport: Transport,
    token: ExecutorToken,
    signal: AbortSignal,
  ): Promise<ClientConnection> {
    const protocol = transport.protocol as ProtocolVersion;
    if (!PROTOCOLS.includes(protocol)) {
      throw new ProtocolMismatchError("the harness negotiated no protocol of the contract", {
        reason: "protocol_mismatch",
        expected: PROTOCOLS.join(", "),
        received: transport.protocol,
      });
    }
    const capabilities = this.#computeCapabilities();
    const peer = new Peer(transport, {
      clock: this.#clock,
      logger: this.#logger,
      maxFrameBytes: this.#maxFrameBytes,
      requestTimeoutMs: this.#requestTimeoutMs,
      capabilities,
    });
    const resumeSessions = this.#executorId !== undefined ? this.#sessions.ids() : undefined;
    const params: ExecutorRegisterParams = {
      protocol,
      environment_id: this.#credentials.environmentId,
      executor: this.#options.executor,
      capabilities,
    };
    if (this.#credentials.machineId) params.machine_id = this.#credentials.machineId;
    if (this.#options.maxSessions !== undefined) params.max_sessions = this.#options.maxSessions;
    if (resumeSessions) {
      params.resume = { executor_id: this.#executorId!, active_sessions: resumeSessions };
    }
    const connection: ClientConnection = {
      peer,
      token,
      registration: undefined as unknown as ExecutorRegisterResult,
      executorCloseReceived: false,
      resumeSent: resumeSessions,
      advertised: capabilities,
    };
    this.#installHandlers(connection);
    const registration = await peer.call("executor.register", params, { signal });
    (connection as { registration: ExecutorRegisterResult }).registration = registration;
    return connection;
  }

  #installHandlers(connection: ClientConnection): void {
    const peer = connection.peer;
    peer.onRequest("session.assign", (params) => this.#assign(params));
    peer.onRequest("session.stop", (params) => this.#stopSession(params));
    peer.onRequest("tool.call", (params) => this.#calls.call(params));
    peer.onRequest("tool.cancel", (params) => this.#calls.cancel(params));
    peer.onRequest("executor.drain", (params) => {
      this.#startDrain({
        source: "request",
        reason: params.reason,
        deadlineMs: params.deadline_ms,
      });
      return { active_sessions: this.#sessions.ids() };
    });
    peer.onNotification("executor.close", (params) => {
      connection.executorCloseReceived = true;
      this.#logger.info("the harness sent executor.close: stopping", { reason: params.reason });
      peer.close(1000, "executor.close received");
    });
    for (const method of this.#requestHandlers.keys()) this.#installRequest(method, peer);
    for (const method of this.#notificationHandlers.keys()) this.#installNotification(method, peer);
  }

  /** Routes a served request method on a peer to the current handler. */
  #installRequest(method: string, peer = this.#connection?.peer): void {
    if (!peer) return;
    peer.onRequest(
      method as HarnessRequestMethod,
      ((params: unknown, ctx: RequestContext) => {
        const handler = this.#requestHandlers.get(method);
        if (!handler) {
          throw new CapabilityMissingError("not served", {
            reason: "capability_missing",
            capability: method,
          });
        }
        return handler(params, ctx);
      }) as RequestHandler<HarnessRequestMethod>,
    );
  }

  #installNotification(method: string, peer = this.#connection?.peer): void {
    if (!peer) return;
    peer.onNotification(method as HarnessNotificationMethod, (params: unknown) => {
      return this.#notificationHandlers.get(method)?.(params) as void | Promise<void>;
    });
  }

  #connected(connection: ClientConnection): void {
    const { registration, peer } = connection;
    const first = this.#executorId === undefined;
    this.#executorId = registration.executor_id;
    this.#token = connection.token;
    this.#connection = connection;
    this.#logger.info(first ? "registered" : "re-registered", {
      url: displayUrl(connection.token.url),
      executor_id: registration.executor_id,
      protocol: registration.protocol,
      heartbeat_interval_ms: registration.heartbeat_interval_ms,
    });
    connection.lease = new Lease({
      peer,
      clock: this.#clock,
      logger: this.#logger,
      intervalMs: registration.heartbeat_interval_ms,
      activeSessions: () => this.#sessions.ids(),
      onDrain: () => this.#startDrain({ source: "heartbeat" }),
      onDead: () => this.#loop?.abandon(connection, "heartbeats unanswered"),
    });
    connection.lease.start();
    const expiresAt = connection.token.expiresAt;
    if (this.#credentials.refreshable && expiresAt !== undefined) {
      connection.refresher = new TokenRefresher({
        peer,
        clock: this.#clock,
        logger: this.#logger,
        credentials: this.#credentials,
        expiresAt,
        leadMs: this.#options.tokenRefreshLeadMs ?? 60_000,
        retry: this.#retry,
        random: this.#random,
        onRefreshed: (token) => (this.#token = token),
      });
      connection.refresher.start();
    }
    this.#dropUnresumed(connection);
    // Capabilities changed while registering are published now.
    this.#capabilitiesChanged();
    this.#events.attach(peer);
    for (const waiter of this.#connectionWaiters) waiter.resolve(peer);
    this.#connectionWaiters.clear();
  }

  #disconnected(connection: ClientConnection, info: CloseInfo): void {
    connection.lease?.stop();
    connection.refresher?.stop();
    this.#events.detach(connection.peer);
    if (this.#connection === connection) this.#connection = undefined;
    // The connection loop says what follows (reconnecting, or stopping): one line, not two.
    this.#logger.debug("disconnected", { code: info.code });
  }

  /** Sessions the harness did not reattach after a reconnect are gone: clean them up. */
  #dropUnresumed(connection: ClientConnection): void {
    const sent = connection.resumeSent;
    const resumed = connection.registration.resumed_sessions;
    if (!sent || !Array.isArray(resumed)) return;
    const kept = new Set(resumed);
    for (const id of sent) {
      const session = this.#sessions.get(id);
      if (!session || kept.has(id)) continue;
      this.#logger.warn("session not resumed by the harness: cleaning up", { session_id: id });
      void this.#sessions.end(session, {
        reason: "not_resumed",
        graceMs: this.#sessionGraceMs,
        notify: false,
      });
    }
  }

  #whenConnected(signal?: AbortSignal): Promise<Peer> {
    const connection = this.#connection;
    if (connection && !connection.peer.isClosed) return Promise.resolve(connection.peer);
    if (this.#state === "stopped" || this.#state === "stopping") {
      return Promise.reject(new ClientStoppedError());
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    const waiter = deferred<Peer>();
    this.#connectionWaiters.add(waiter);
    if (signal) {
      const onAbort = () => {
        this.#connectionWaiters.delete(waiter);
        waiter.reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      waiter.promise.then(
        () => signal.removeEventListener("abort", onAbort),
        () => signal.removeEventListener("abort", onAbort),
      );
    }
    return waiter.promise;
  }

  async #currentToken(signal?: AbortSignal): Promise<string | undefined> {
    const token = this.#token;
    if (
      token?.token &&
      (token.expiresAt === undefined || token.expiresAt - this.#clock.now() > 10_000)
    ) {
      return token.token;
    }
    if (this.#credentials.scope === "local") return undefined;
    const fresh = await this.#credentials.fetchToken(signal ?? new AbortController().signal);
    this.#token = fresh;
    return fresh.token;
  }

  // ---- capabilities --------------------------------------------------------------------------

  #servedTool(tool: string): ServedTool | undefined {
    const served = this.#registry.servedTool(tool);
    if (!served) return undefined;
    const group = TOOL_SPECS.get(tool)?.group;
    const configured = (this.#options.capabilities as Record<string, unknown> | undefined)?.[
      group ?? ""
    ] as { enabled?: unknown } | undefined;
    if (group && configured?.enabled === false) return undefined;
    return served;
  }

  #computeCapabilities(): Capabilities {
    const configured = this.#contributions.size === 0
      ? this.#options.capabilities
      : withContributions([...this.#contributions].map((f) => f()), this.#options.capabilities);
    return computeCapabilities(
      this.#registry.served(),
      this.#requestHandlers.keys(),
      configured,
      this.#registry.definitions(),
    );
  }

  /** Publishes changed capabilities on the open connection (`executor.capabilities.update`). */
  #capabilitiesChanged(): void {
    const connection = this.#connection;
    if (!connection || connection.peer.isClosed) return;
    const capabilities = this.#computeCapabilities();
    connection.peer.capabilities = capabilities;
    if (sameCapabilities(capabilities, connection.advertised)) return;
    connection.advertised = capabilities;
    try {
      connection.peer.notify("executor.capabilities.update", { capabilities });
    } catch (error) {
      this.#logger.debug("capabilities update not sent", { error: describeError(error) });
    }
  }

  // ---- sessions ------------------------------------------------------------------------------

  #assign(params: SessionAssignParams): SessionAssignResult | Promise<SessionAssignResult> {
    const accepted: SessionAssignResult = { session_id: params.session_id, accepted: true };
    const existing = this.#sessions.get(params.session_id);
    if (existing) {
      // A repeat (a retry after a reconnect) is accepted again; one still ending must wait.
      if (this.#sessions.isLive(existing)) return accepted;
      throw new UnavailableError("the session is ending", { reason: "session_ending" });
    }
    if (this.#draining) throw new UnavailableError("draining", { reason: "draining" });
    const max = this.#options.maxSessions;
    if (max !== undefined && this.#sessions.size >= max) {
      throw new ResourceExhaustedError(`at most ${max} sessions`, { reason: "max_sessions" });
    }
    for (const tool of params.tools ?? []) {
      if (!this.#servedTool(tool)) {
        throw new CapabilityMissingError(`tool ${tool} is not served`, {
          reason: "capability_missing",
          capability: `tool:${tool}`,
        });
      }
    }
    const session = this.#sessions.add(params);
    if (this.#assignHandlers.size === 0) {
      // Nothing to set up: ready right after the answer (sent when this returns).
      this.#sessions.markAccepted(session);
      queueMicrotask(() => {
        this.sessionReady(session.id).catch((error) =>
          this.#logger.debug("session.ready not delivered", { error: describeError(error) })
        );
      });
      return accepted;
    }
    return (async () => {
      try {
        for (const handler of [...this.#assignHandlers]) await handler(session, params);
      } catch (error) {
        this.#sessions.remove(session);
        throw error;
      }
      // session.ready may follow only once the answer is written, which happens after this
      // promise settles and the peer serializes it: wait one macrotask turn.
      globalThis.setTimeout(() => this.#sessions.markAccepted(session), 0);
      return accepted;
    })();
  }

  #stopSession(params: SessionStopParams): SessionStopResult {
    const session = this.#sessions.get(params.session_id);
    if (!session) return { stopping: false };
    const handlers = [...this.#stopHandlers];
    void this.#sessions.end(session, {
      reason: params.reason ?? "stopped",
      graceMs: params.grace_ms ?? this.#sessionGraceMs,
      notify: true,
      before: async () => {
        for (const handler of handlers) await handler(session, params);
      },
    });
    return { stopping: true };
  }

  async #sendEnded(sessionId: string, reason: string): Promise<void> {
    try {
      await deliver(
        this.#link,
        "session.ended",
        { session_id: sessionId, reason },
        this.#delivery(),
      );
    } catch (error) {
      this.#logger.warn("session.ended not delivered", {
        session_id: sessionId,
        error: describeError(error),
      });
    }
  }

  #startDrain(info: DrainInfo): void {
    if (this.#draining) return;
    this.#draining = true;
    this.#logger.info("draining: no new sessions", { source: info.source });
    for (const handler of [...this.#drainHandlers]) {
      Promise.resolve().then(() => handler(info)).catch((error) =>
        this.#logger.warn("drain handler failed", { error: describeError(error) })
      );
    }
  }

  #delivery() {
    return {
      clock: this.#clock,
      random: this.#random,
      retry: this.#retry,
      timeoutMs: this.#requestTimeoutMs,
    };
  }

  #resultLost(result: ToolResultParams, error: unknown): void {
    for (const handler of [...this.#lostHandlers]) {
      try {
        handler(result, error);
      } catch (handlerError) {
        this.#logger.error("onToolResultLost handler failed", {
          error: describeError(handlerError),
        });
      }
    }
  }

  // ---- shutdown ------------------------------------------------------------------------------

  #setState(state: ClientState): void {
    if (this.#state === state || this.#state === "stopped") return;
    if (this.#state === "stopping" && state !== "stopped") return;
    this.#state = state;
    for (const handler of [...this.#stateHandlers]) {
      try {
        handler(state);
      } catch (error) {
        this.#logger.warn("state handler failed", { error: describeError(error) });
      }
    }
  }

  async #shutdown(info: ExecutorClosedInfo, options: StopOptions): Promise<ExecutorClosedInfo> {
    this.#setState("stopping");
    this.#draining = true;
    const graceMs = options.graceMs ?? 0;
    if (graceMs > 0 && this.connected) {
      const giveUp = this.#graceCut = new AbortController();
      await Promise.race([
        (async () => {
          await this.#calls.allSettled();
          await this.#results.idle();
          await Promise.all(this.#sessions.ids().map((id) => this.#events.idle(id)));
        })(),
        sleep(this.#clock, graceMs, giveUp.signal).catch(() => {}),
      ]);
      giveUp.abort();
    }
    // Taken before halting: halting the loop detaches the connection.
    const connection = this.#connection;
    this.#loop?.halt();
    const stopped = new ClientStoppedError();
    this.#calls.abortAll("the executor is stopping");
    this.#results.close(stopped);
    this.#events.close(stopped);
    for (const waiter of this.#connectionWaiters) waiter.reject(stopped);
    this.#connectionWaiters.clear();
    await Promise.all(
      this.#sessions.all().map((session) =>
        this.#sessions.end(session, {
          reason: "client_stopped",
          graceMs: this.#sessionGraceMs,
          notify: false,
        })
      ),
    );
    if (connection && !connection.peer.isClosed) {
      try {
        connection.peer.notify("executor.close", { reason: options.reason ?? "shutdown" });
      } catch {
        // The connection closed meanwhile.
      }
      // A dead link may never complete the close handshake: do not wait for it forever.
      const giveUp = new AbortController();
      await Promise.race([
        connection.peer.close(1000, "executor stopped"),
        sleep(this.#clock, 2_000, giveUp.signal).catch(() => {}),
      ]);
      giveUp.abort();
    }
    this.#connection = undefined;
    const listening = this.#listening;
    if (listening) {
      listening.inbound.close();
      await listening.server.close();
    }
    this.#setState("stopped");
    this.#logger.info("stopped", { reason: info.reason, code: info.code });
    this.#closed.resolve(info);
    return info;
  }
}
