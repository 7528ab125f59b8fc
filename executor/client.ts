/**
 * `ExecutorClient`: the executor end of the protocol. It dials out to a harness, registers what
 * it serves, keeps its lease and token alive, reconnects with resume, holds sessions, runs tool
 * calls and delivers their results and its durable events exactly once across reconnects.
 *
 * The public face: what it does is in `executor/core.ts` (the parts and the one handler table
 * every connection is served from) and `executor/connector.ts` (the connections); the face
 * checks what a caller may do and hands it on.
 *
 * Portable: the dialer and fetch are injected (`executor/node.ts` preconfigures the Node dialer).
 */
import { aborted, raceSignal, throwIfAborted } from "../protocol/abort.ts";
import { LocalError, RequestAbortedError } from "../protocol/errors.ts";
import type {
  Artifact,
  Capabilities,
  ExecutorNotificationMethod,
  ExecutorRegisterResult,
  ExecutorRequestMethod,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  NotificationMap,
  RequestMap,
  SessionEventParams,
  SessionStatus,
} from "../protocol/generated/contract.ts";
import type { Disposable, NotificationHandler, RequestHandler } from "../protocol/peer.ts";
import type { Dialer } from "../transport/transport.ts";
import { isLocalSocketUrl, localSocketPath, type RunningServer } from "../transport/server.ts";
import type { ArtifactUpload } from "./artifacts.ts";
import type { ClientState, ExecutorClosedInfo } from "./connection-loop.ts";
import { Connector } from "./connector.ts";
import { ExecutorCore } from "./core.ts";
import type { Credentials } from "./credentials.ts";
import { ClientStoppedError, ExecutorConfigError, UnknownSessionError } from "./errors.ts";
import type { ExecutorExtensionHost } from "./extension.ts";
import { type ExecutorListener, InboundConnections } from "./listener.ts";
import type {
  DrainHandler,
  ExecutorCallOptions,
  ExecutorClientOptions,
  SessionAssignHandler,
  SessionStopHandler,
  StopOptions,
} from "./options.ts";
import { deliver } from "../protocol/retry.ts";
import type { ToolResultLostHandler } from "./options.ts";
import type { ExecutorSession } from "./sessions.ts";
import { deferred } from "./timing.ts";
import type {
  ToolInputSchema,
  ToolOutputSchema,
  ToolSlot,
  ToolSlots,
  TypedToolDefinition,
  TypedToolHandler,
} from "./tool-slots.ts";

/**
 * How long a stop waits, after canceling the calls still running, for their results to be
 * delivered: a handler killing its process gets its grace (2 s by default) and a little more.
 */
const CANCELED_RESULTS_MS = 3_000;

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

/** The executor end of the BMA Executor Protocol. */
export class ExecutorClient {
  /** The typed slots of the built-in tools: `client.tools.bash.handle(...)`. */
  readonly tools: ToolSlots;
  /** Settles (never rejects) when the client has stopped for good, with the reason. */
  readonly closed: Promise<ExecutorClosedInfo>;

  readonly #core: ExecutorCore;
  readonly #connector: Connector;
  /** Settles when the connection loop has ended for good (a refusal, or the harness's close). */
  #loopEnded: Promise<void> | undefined;
  readonly #closed = deferred<ExecutorClosedInfo>();
  #started: Promise<ExecutorRegisterResult> | undefined;
  #stopping: Promise<ExecutorClosedInfo> | undefined;
  /** Ends the grace period of a stop still waiting for current work. */
  #graceCut: AbortController | undefined;
  #listening: { server: RunningServer; inbound: InboundConnections } | undefined;

  /**
   * Checks the options (throws {@linkcode ExecutorConfigError}); nothing connects before `start()`
   * or `listen()`.
   */
  constructor(options: ExecutorClientOptions) {
    const core = new ExecutorCore(options);
    this.#core = core;
    this.#connector = new Connector(core);
    this.tools = core.registry.slots;
    this.closed = this.#closed.promise;
  }

  // ---- state ---------------------------------------------------------------------------------

  /** Where the client is: idle, connecting, connected, waiting (backoff), stopping, stopped. */
  get state(): ClientState {
    return this.#core.link.state;
  }

  /** Whether a registered connection is up. */
  get connected(): boolean {
    return this.#core.link.open !== undefined;
  }

  /** The executor id the harness assigned at the first registration. */
  get executorId(): string | undefined {
    return this.#core.executorId;
  }

  /** Whether the executor is draining (refusing new sessions). */
  get draining(): boolean {
    return this.#core.draining;
  }

  /** The capabilities the executor advertises now. */
  get capabilities(): Capabilities {
    return this.#core.capabilities();
  }

  /** The sessions held. */
  get sessions(): ExecutorSession[] {
    return this.#core.sessions.all();
  }

  /** The session with this id, if held. */
  session(sessionId: string): ExecutorSession | undefined {
    return this.#core.sessions.get(sessionId);
  }

  /** Observes state changes (e.g. to show connectivity). */
  onStateChange(handler: (state: ClientState) => void): Disposable {
    return this.#core.link.onStateChange(handler);
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
    const registry = this.#core.registry;
    if (definition === undefined && handler === undefined) return registry.slot(name);
    return registry.define(name, definition, handler);
  }

  /** Decides on assigned sessions (default: accept). Throw a `ProtocolError` to refuse. */
  onSessionAssign(handler: SessionAssignHandler): Disposable {
    return added(this.#core.assignHandlers, handler);
  }

  /** Runs when the harness stops a session, before its cleanup hooks and `session.ended`. */
  onSessionStop(handler: SessionStopHandler): Disposable {
    return added(this.#core.stopHandlers, handler);
  }

  /** Runs once when the executor starts draining. */
  onDrain(handler: DrainHandler): Disposable {
    return added(this.#core.drainHandlers, handler);
  }

  /** Receives each tool result the client gave up on (a final refusal, or the client stopped). */
  onToolResultLost(handler: ToolResultLostHandler): Disposable {
    return added(this.#core.lostHandlers, handler);
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
    return this.#core.serveRequest(method, handler);
  }

  /**
   * The client's extension seam: calls `install` with what a capability built on top of the
   * client needs of it besides the public API ({@linkcode ExecutorExtensionHost}), and returns
   * what it returns. The agent capability plugs in here: `serveAgent(client, handler, options)`
   * from `bma-executor-sdk/agent`.
   */
  extend<T>(install: (host: ExecutorExtensionHost) => T): T {
    return install(this.#core.extensionHost);
  }

  /** Receives a notification from the harness (`mcp.message`). */
  onNotification<M extends HarnessNotificationMethod>(
    method: M,
    handler: NotificationHandler<M>,
  ): Disposable {
    if (method === "executor.close") {
      throw new ExecutorConfigError("executor.close is handled by the client (see closed)");
    }
    return this.#core.serveNotification(method, handler);
  }

  // ---- sending -------------------------------------------------------------------------------

  /**
   * Sends a request to the harness, typed by the contract.
   *
   * - `session.event` is durable: kept until acknowledged and resent after reconnects (resolves
   *   with the acknowledgement).
   * - `tool.result`, `session.ready` and `session.ended` are delivered until accepted.
   * - Anything else waits for a connection and is sent once.
   *
   * `options.signal` stops the wait (rejects with `RequestAbortedError`): for a durable or
   * delivered request only the wait, the request is still delivered; an already-aborted signal
   * sends nothing.
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
    const signal = options.signal;
    const refused = aborted(signal, method);
    if (refused) return refused;
    const core = this.#core;
    if (method === "session.event") {
      const acked = core.events.enqueue(params as SessionEventParams) as Promise<
        RequestMap[M]["result"]
      >;
      return raceSignal(acked, signal, method);
    }
    const timeoutMs = options.timeoutMs ?? core.requestTimeoutMs;
    // The waits below end with the signal's own reason: raceSignal answers first, as the
    // SDK's RequestAbortedError.
    if (DELIVERED_CALLS.has(method)) {
      return raceSignal(
        deliver(core.link, method, params, { ...core.delivery, timeoutMs, signal }),
        signal,
        method,
      );
    }
    return raceSignal(
      core.link.whenConnected(signal).then((peer) =>
        peer.call(method, params, { signal, timeoutMs })
      ),
      signal,
      method,
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
    return this.#core.link.notify(method, params);
  }

  /**
   * Whether the link to the harness holds more than the peer's `maxBufferedBytes` unsent (a
   * harness reading slower than this executor sends); false while not connected. A producer of
   * what must not be lost waits while it is true.
   */
  get congested(): boolean {
    return this.#core.link.congested;
  }

  /**
   * Reports a session ready after its set-up (`session.ready`, delivered until accepted).
   * `options.signal` stops waiting for the harness's answer (rejects with
   * `RequestAbortedError`); the report is still delivered.
   */
  sessionReady(sessionId: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const signal = options.signal;
    return aborted(signal, "session.ready") ??
      raceSignal(this.#core.sessionReady(sessionId), signal, "session.ready");
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
   * events, then sends `session.ended` until accepted. `options.signal` stops waiting for that
   * (rejects with `RequestAbortedError`); the session still ends.
   */
  async sessionEnded(
    sessionId: string,
    reason = "ended",
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    const session = this.#core.sessions.get(sessionId);
    if (!session) throw new UnknownSessionError(sessionId);
    throwIfAborted(options.signal, "session.ended");
    await raceSignal(this.#core.endSession(session, reason, true), options.signal, "session.ended");
  }

  /**
   * Uploads an artifact (POST /v1/environments/{environment_id}/artifacts, legacy alias);
   * `upload.signal` aborts it (rejects with `RequestAbortedError`).
   */
  uploadArtifact(upload: ArtifactUpload): Promise<Artifact> {
    const signal = upload.signal;
    return aborted(signal, "artifact.upload") ??
      raceSignal(this.#core.artifacts.upload(upload), signal, "artifact.upload");
  }

  // ---- life cycle ----------------------------------------------------------------------------

  /**
   * Connects and registers; resolves with the registration once registered. Transient failures
   * (no answer, a refused connection, HTTP 5xx, 408, 429, a dropped connection) are retried
   * with backoff meanwhile. Rejects with the contract's error when the harness refuses the
   * registration (-32010 `ProtocolMismatchError`, -32012 `CapabilityMissingError` with
   * `data.reason` and `data.capability`), `CredentialRejectedError` when the token endpoint
   * refuses the credential, `ConnectionRefusedError` for a refused upgrade (HTTP 401, 403),
   * `NotAHarnessError` when the URL answers as no harness does (HTTP 404, a 200 without an
   * upgrade, ...; with `baseUrl`, a token endpoint answering 404 or a web page),
   * `InvalidTokenSourceResultError` when a `tokenSource` returns the wrong shape, or
   * `ClientStoppedError` when stopped first. `options.signal` stops waiting (rejects with
   * `RequestAbortedError`, whose `cause` is the last attempt's failure — why it has not
   * connected yet — or, when none failed, the signal's reason) while the client goes on
   * connecting (`stop()` ends that); an already-aborted signal starts nothing.
   *
   * ```ts
   * try {
   *   await client.start({ signal: AbortSignal.timeout(30_000) });
   * } catch (error) {
   *   if (error instanceof RequestAbortedError) console.error("not connected yet:", error.cause);
   *   await client.stop();
   * }
   * ```
   */
  start(startOptions: { signal?: AbortSignal } = {}): Promise<ExecutorRegisterResult> {
    if (this.#stopping) return Promise.reject(new ClientStoppedError());
    const signal = startOptions.signal;
    const refused = aborted(signal, "start");
    if (refused) return refused;
    if (this.#started) return this.#whenStarted(this.#started, signal);
    const { missingCredential, credentials, options } = this.#core;
    if (missingCredential) return Promise.reject(missingCredential);
    if (!options.dial) {
      return Promise.reject(
        new ExecutorConfigError(
          "no dialer: pass the dial option, or import ExecutorClient from executor/node.ts",
        ),
      );
    }
    return this.#whenStarted(this.#run(credentials, options.dial), signal);
  }

  /**
   * `started`, unless `signal` aborts first: then `RequestAbortedError` with the last failed
   * attempt's error as its `cause` (a caller that gives up is told why it waited), or the
   * signal's reason when no attempt has failed.
   */
  #whenStarted(
    started: Promise<ExecutorRegisterResult>,
    signal: AbortSignal | undefined,
  ): Promise<ExecutorRegisterResult> {
    return raceSignal(started, signal, "start").catch((error: unknown) => {
      const last = this.#connector.lastFailure;
      const byTheSignal = error instanceof RequestAbortedError && signal?.aborted === true &&
        error.cause === signal.reason;
      if (!byTheSignal || last === undefined) throw error;
      throw new RequestAbortedError("start", last);
    });
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
    if (typeof url !== "string" || !isLocalSocketUrl(url)) {
      throw new ExecutorConfigError("listen takes unix:///path.sock or \\\\.\\pipe\\name");
    }
    const core = this.#core;
    const serve = core.options.server;
    if (!serve) {
      throw new ExecutorConfigError(
        "no server: pass the server option, or import ExecutorClient from a runtime entry point",
      );
    }
    const inbound = new InboundConnections();
    // Claimed before the first await: a concurrent listen() is refused, and a start() waits for
    // the first registration of a harness that dials in.
    const claim = deferred<ExecutorRegisterResult>();
    claim.promise.catch(() => {});
    this.#started = claim.promise;
    let server: RunningServer;
    try {
      server = await serve({
        path: localSocketPath(url),
        maxFrameBytes: core.maxFrameBytes,
        upgrade: (request, protocols) => inbound.upgrade(request, protocols),
      });
    } catch (error) {
      this.#started = undefined;
      throw error;
    }
    this.#listening = { server, inbound };
    const local: Credentials = {
      scope: "local",
      environmentId: core.credentials.environmentId,
      machineId: core.credentials.machineId,
      baseUrl: core.credentials.baseUrl,
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
    const loop = this.#connector.run(credentials, dial);
    this.#loopEnded = loop.finished.then(() => {});
    loop.finished.then((info) => {
      if (!this.#stopping) this.#stopping = this.#shutdown(info, {});
    });
    this.#started = loop.start().then((connection) => connection.registration);
    return this.#started;
  }

  /**
   * Stops for good: refuses new work, optionally lets current work finish (`graceMs`: connected or
   * not, the client goes on reconnecting meanwhile, so their results reach the harness), aborts
   * what still runs, runs the sessions' cleanup hooks, sends `executor.close` and closes with
   * 1000. Results not delivered by then go to `onToolResultLost`. Calling it again returns the
   * same promise, and without `graceMs` cuts a grace period still running short.
   * `options.signal` stops waiting (rejects with `RequestAbortedError`), not the stop.
   */
  stop(options: StopOptions = {}): Promise<ExecutorClosedInfo> {
    const signal = options.signal;
    const refused = aborted(signal, "stop");
    if (refused) return refused;
    if (!this.#stopping) this.#stopping = this.#shutdown({ reason: "stopped" }, options);
    else if (!options.graceMs) this.#graceCut?.abort();
    return raceSignal(this.#stopping, signal, "stop");
  }

  /** Stops the client as {@linkcode stop} does: `await using client = new ExecutorClient(…)`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }

  // ---- shutdown ------------------------------------------------------------------------------

  async #shutdown(info: ExecutorClosedInfo, options: StopOptions): Promise<ExecutorClosedInfo> {
    const core = this.#core;
    core.link.setState("stopping");
    core.draining = true;
    const graceMs = options.graceMs ?? 0;
    if (graceMs > 0) {
      // Connected or not: the connection loop goes on meanwhile, so the results and events of
      // work that finishes reach a harness that comes back within the grace period (one that
      // restarts, a network cut), rather than being given up at once.
      core.link.graceful = true;
      const cut = this.#graceCut = new AbortController();
      // A loop that ended for good meanwhile (the harness closed this executor, or refused its
      // credential) brings no connection for the results: the grace period is over then.
      await Promise.race([
        core.settle(graceMs, cut.signal),
        this.#loopEnded ?? new Promise(() => {}),
      ]);
      cut.abort();
      core.link.graceful = false;
    }
    if (this.connected && core.calls.active > 0) {
      // Stopping now cancels the calls still running; their results (`canceled`) get a moment
      // to go out, so that the harness learns what became of them rather than losing them
      // with the connection (`tool_outcome_unknown`).
      core.calls.abortAll("the executor is stopping");
      const settled = new AbortController();
      await core.settle(CANCELED_RESULTS_MS, settled.signal);
      // Its timer goes too: a stop must not keep the process alive.
      settled.abort();
    }
    // Taken before halting: halting the loop detaches the connection.
    const connection = core.link.current;
    this.#connector.halt();
    await core.close();
    if (connection) {
      await this.#connector.close(connection, options.reason ?? "shutdown");
      core.link.detach(connection);
    }
    const listening = this.#listening;
    if (listening) {
      listening.inbound.close();
      await listening.server.close();
    }
    core.link.setState("stopped");
    core.logger.info("stopped", { reason: info.reason, code: info.code });
    this.#closed.resolve(info);
    return info;
  }
}

/** Adds `handler` to `set` until the registration is disposed. */
function added<T>(set: Set<T>, handler: T): Disposable {
  set.add(handler);
  return { dispose: () => void set.delete(handler) };
}
