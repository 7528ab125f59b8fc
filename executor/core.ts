/**
 * The executor's rules, once (internal): what each method the harness sends does — one handler
 * table, built once and served on every connection's peer — and the parts that hold the
 * executor's state: its tools and capabilities, sessions, tool calls, the outboxes of results
 * and events, artifacts, the link to the harness. `ExecutorClient` (the public face) composes
 * it and `Connector` registers connections with it; a part is given the parts it needs when it
 * is made, so nothing reaches back up into the face.
 */
import { type Clock, systemClock } from "../protocol/clock.ts";
import { echoed } from "../protocol/issues.ts";
import type {
  Capabilities,
  HarnessNotificationMethod,
  HarnessRequestMethod,
  SessionAssignParams,
  SessionAssignResult,
  SessionStopParams,
  SessionStopResult,
} from "../protocol/generated/contract.ts";
import {
  CapabilityMissingError,
  ResourceExhaustedError,
  UnavailableError,
} from "../protocol/generated/errors.ts";
import { isLogger, type Logger, silentLogger } from "../protocol/logger.ts";
import {
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type Disposable,
  type NotificationHandler,
  PeerHandlers,
  type ReplyHooks,
  type RequestContext,
  type RequestHandler,
  type SharedNotificationHandler,
  type SharedRequestHandler,
} from "../protocol/peer.ts";
import { randomHex } from "../protocol/ids.ts";
import { spanning, type Telemetry, telemetryOf } from "../protocol/telemetry.ts";
import { traceContextOf } from "../protocol/trace-context.ts";
import { ArtifactUploader } from "./artifacts.ts";
import { computeCapabilities, sameCapabilities } from "./capabilities.ts";
import {
  createCredentials,
  type Credentials,
  LOCAL_ENVIRONMENT_ID,
  normalizeBaseUrl,
  TokenCache,
} from "./credentials.ts";
import {
  ClientStoppedError,
  displayUrl,
  ExecutorConfigError,
  UnknownSessionError,
} from "./errors.ts";
import { sentInTheClear } from "../transport/dial-url.ts";
import { EventOutbox } from "./event-outbox.ts";
import { type ExecutorExtensionHost, withContributions } from "./extension.ts";
import { type ClientConnection, ClientLink } from "./link.ts";
import type {
  DrainHandler,
  DrainInfo,
  ExecutorClientOptions,
  SessionAssignHandler,
  SessionStopHandler,
} from "./options.ts";
import { backoffPolicyProblem, deliver, type DeliveryOptions } from "../protocol/retry.ts";
import { isTimerSpan, MAX_TIMEOUT_MS } from "../protocol/timeout-option.ts";
import { SecretScrubber } from "./secrets.ts";
import { type ExecutorSession, SessionTable } from "./sessions.ts";
import { type BackoffPolicy, describeError, sleep } from "./timing.ts";
import {
  DEFAULT_MAX_QUEUED_TOOL_CALLS,
  DEFAULT_MAX_RUNNING_TOOL_CALLS,
  ToolCallRunner,
} from "./tool-calls.ts";
import type { ToolResultLostHandler } from "./options.ts";
import { INLINE_RESULT_BYTES, ResultOutbox } from "./tool-results.ts";
import { ToolRegistry } from "./tool-slots.ts";

type RequestFn = (params: unknown, context: RequestContext) => unknown;
type NotificationFn = (params: unknown) => unknown;

/** A harness's 1009 never lowers the frames an executor sends below this many bytes. */
export const MIN_LOWERED_SEND_BYTES = 64 * 1024;

/** The executor core. */
export class ExecutorCore {
  readonly options: ExecutorClientOptions;
  readonly clock: Clock;
  readonly random: () => number;
  /** The user's logger behind the scrubber: secret-named fields and known secrets redacted. */
  readonly logger: Logger;
  readonly scrubber: SecretScrubber;
  readonly credentials: Credentials;
  /** Set when made without a credential: only `listen()` can work, `start()` fails with it. */
  readonly missingCredential: ExecutorConfigError | undefined;
  readonly requestTimeoutMs: number;
  readonly maxFrameBytes: number;
  /**
   * The largest frame sent (UTF-8 bytes): `maxFrameBytes`, lowered when the harness closes a
   * connection with 1009 (see {@linkcode ExecutorCore.harnessRefusedFrame}).
   */
  maxSendBytes: number;
  readonly sessionGraceMs: number;
  readonly retry: BackoffPolicy;
  /** How requests delivered until accepted retry (`session.ready`, `session.ended`). */
  readonly delivery: DeliveryOptions;
  readonly link: ClientLink;
  readonly tokens: TokenCache;
  readonly registry: ToolRegistry;
  readonly artifacts: ArtifactUploader;
  readonly events: EventOutbox;
  readonly results: ResultOutbox;
  readonly sessions: SessionTable;
  readonly calls: ToolCallRunner;
  /** Opens the client's spans; absent without the `telemetry` option. */
  readonly telemetry: Telemetry | undefined;
  /** What each method the harness sends does, on every connection. */
  readonly handlers: PeerHandlers<ClientConnection>;
  /** What `extend` hands a capability built on top of the client. */
  readonly extensionHost: ExecutorExtensionHost;
  readonly assignHandlers = new Set<SessionAssignHandler>();
  readonly stopHandlers = new Set<SessionStopHandler>();
  readonly drainHandlers = new Set<DrainHandler>();
  readonly lostHandlers = new Set<ToolResultLostHandler>();
  /** The executor id the harness assigned at the first registration. */
  executorId: string | undefined;
  /** Refusing new sessions (the harness asked, or the client is stopping). */
  draining = false;
  readonly #requests = new Map<string, RequestFn>();
  readonly #notifications = new Map<string, NotificationFn>();
  /** Capabilities added by capability modules (the agent capability's `max_sessions`). */
  readonly #contributions = new Set<() => Capabilities>();
  /** Sessions whose `onSessionAssign` handlers still run, with the assignment's answer. */
  readonly #settingUp = new Map<ExecutorSession, Promise<SessionAssignResult>>();
  /** How long the `onSessionAssign` handlers may take before the assignment is refused. */
  readonly assignTimeoutMs: number;

  /** Checks the options (throws {@linkcode ExecutorConfigError}) and makes the parts. */
  constructor(options: ExecutorClientOptions) {
    checkOptions(options);
    this.options = options;
    const clock = this.clock = options.clock ?? systemClock;
    const random = this.random = options.random ?? Math.random;
    const scrubber = this.scrubber = new SecretScrubber([
      options.environmentKey,
      options.machineToken,
      options.token,
    ]);
    const logger = this.logger = scrubber.logger(options.logger ?? silentLogger);
    const { credentials, missing } = credentialsOf(options, clock, scrubber);
    if (
      (credentials.scope === "environment" || credentials.scope === "machine") &&
      credentials.baseUrl !== undefined && sentInTheClear(credentials.baseUrl)
    ) {
      // A long-lived secret: whoever reads it once can mint tokens until it is revoked.
      logger.warn(
        `the ${credentials.scope} credential is exchanged over plain http with another machine: ` +
          "it can be read on the way (use https)",
        { url: displayUrl(credentials.baseUrl) },
      );
    }
    this.credentials = credentials;
    this.missingCredential = missing;
    const requestTimeoutMs = this.requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
    this.maxFrameBytes = this.maxSendBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    const sessionGraceMs = this.sessionGraceMs = options.sessionGraceMs ?? 5_000;
    this.assignTimeoutMs = options.assignTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const retry = this.retry = options.retry ?? { initialDelayMs: 250, maxDelayMs: 10_000 };
    this.delivery = { clock, random, retry, timeoutMs: requestTimeoutMs };
    if (options.onToolResultLost) this.lostHandlers.add(options.onToolResultLost);

    const telemetry = this.telemetry = telemetryOf(
      options.telemetry,
      "bma-executor-sdk/executor",
      logger,
    );
    const link = this.link = new ClientLink(logger);
    this.tokens = new TokenCache(credentials, clock);
    const registry = this.registry = new ToolRegistry(
      () => this.capabilitiesChanged(),
      options.capabilities as Record<string, unknown> | undefined,
    );
    this.artifacts = new ArtifactUploader({
      baseUrl: credentials.baseUrl,
      environmentId: credentials.environmentId,
      // A harness on a local socket is reached through that socket.
      fetch: credentials.fetch ?? options.fetch,
      tokens: this.tokens,
      scrubber,
      retry: { clock, random, policy: retry, wake: (over) => link.nextConnection(over) },
    });
    this.events = new EventOutbox({
      clock,
      logger,
      idPrefix: `ev_${randomHex(8)}_`,
      window: Math.max(1, options.eventWindow ?? 1),
      requestTimeoutMs,
      retry,
      random,
    });
    const results = this.results = new ResultOutbox({
      link,
      ...this.delivery,
      logger,
      lostHandlers: this.lostHandlers,
    });
    const sessions = this.sessions = new SessionTable({
      clock,
      logger,
      cleanupTimeoutMs: options.cleanupTimeoutMs ?? 5_000,
      events: this.events,
      link,
      delivery: this.delivery,
    });
    this.calls = new ToolCallRunner({
      clock,
      logger,
      callLog: options.logger && options.logger !== silentLogger ? logger : undefined,
      scrubber,
      sessions,
      results,
      tools: registry,
      progress: link,
      artifacts: this.artifacts,
      inlineBytes: options.inlineResultBytes ?? INLINE_RESULT_BYTES,
      sessionGraceMs,
      maxRunning: options.maxRunningToolCalls ?? DEFAULT_MAX_RUNNING_TOOL_CALLS,
      maxQueued: options.maxQueuedToolCalls ?? DEFAULT_MAX_QUEUED_TOOL_CALLS,
      ...(telemetry ? { telemetry } : {}),
    });
    this.handlers = this.#serve();
    this.extensionHost = this.#extensionHost();
  }

  // ---- the handler table ---------------------------------------------------------------------

  /** What each method the harness sends does: built once, for every connection. */
  #serve(): PeerHandlers<ClientConnection> {
    const { sessions, calls, logger } = this;
    const table = new PeerHandlers<ClientConnection>();
    table.onRequest("session.assign", (params, context) => {
      const telemetry = this.telemetry;
      if (!telemetry) return this.#assign(params, context);
      const span = telemetry.start("session.assign", "server", {
        "bma.session_id": params.session_id,
      }, traceContextOf(params));
      return spanning(span, () => this.#assign(params, context));
    });
    table.onRequest("session.stop", (params) => this.#stopSession(params));
    table.onRequest("tool.call", (params, context) => calls.call(params, context));
    table.onRequest("tool.cancel", (params) => calls.cancel(params));
    table.onRequest("executor.drain", (params) => {
      this.startDrain({ source: "request", reason: params.reason, deadlineMs: params.deadline_ms });
      return { active_sessions: sessions.ids() };
    });
    table.onNotification("executor.close", (params, connection) => {
      connection.executorCloseReceived = true;
      logger.info("the harness sent executor.close: stopping", { reason: params.reason });
      connection.peer.close(1000, "executor.close received");
    });
    return table;
  }

  /**
   * Serves a capability request of the user's on every connection. A method once served keeps
   * its place in the table: withdrawn, it is answered -32012, because the harness may send it
   * before it has read the capabilities update that withdrew it.
   */
  serveRequest<M extends HarnessRequestMethod>(method: M, handler: RequestHandler<M>): Disposable {
    if (!this.handlers.request(method)) {
      const dispatch = (params: unknown, context: RequestContext) => {
        const current = this.#requests.get(method);
        if (!current) {
          throw new CapabilityMissingError("not served", {
            reason: "capability_missing",
            capability: method,
          });
        }
        return current(params, context);
      };
      this.handlers.onRequest(method, dispatch as SharedRequestHandler<M, ClientConnection>);
    }
    const stored = handler as unknown as RequestFn;
    this.#requests.set(method, stored);
    this.capabilitiesChanged();
    return {
      dispose: () => {
        if (this.#requests.get(method) !== stored) return;
        this.#requests.delete(method);
        this.capabilitiesChanged();
      },
    };
  }

  /** Receives a notification of the harness's on every connection (`mcp.message`). */
  serveNotification<M extends HarnessNotificationMethod>(
    method: M,
    handler: NotificationHandler<M>,
  ): Disposable {
    if (!this.handlers.notification(method)) {
      const dispatch = (params: unknown) => this.#notifications.get(method)?.(params);
      this.handlers.onNotification(
        method,
        dispatch as SharedNotificationHandler<M, ClientConnection>,
      );
    }
    const stored = handler as unknown as NotificationFn;
    this.#notifications.set(method, stored);
    return {
      dispose: () => {
        if (this.#notifications.get(method) === stored) this.#notifications.delete(method);
      },
    };
  }

  // ---- capabilities --------------------------------------------------------------------------

  /** The capabilities the executor advertises now. */
  capabilities(): Capabilities {
    const configured = this.#contributions.size === 0
      ? this.options.capabilities
      : withContributions([...this.#contributions].map((f) => f()), this.options.capabilities);
    return computeCapabilities(
      this.registry.served(),
      this.#requests.keys(),
      configured,
      this.registry.definitions(),
    );
  }

  /** Publishes changed capabilities on the open connection (`executor.capabilities.update`). */
  capabilitiesChanged(): void {
    const connection = this.link.open;
    if (!connection) return;
    const capabilities = this.capabilities();
    connection.peer.capabilities = capabilities;
    if (sameCapabilities(capabilities, connection.advertised)) return;
    connection.advertised = capabilities;
    try {
      connection.peer.notify("executor.capabilities.update", { capabilities });
    } catch (error) {
      this.logger.debug("capabilities update not sent", { error: describeError(error) });
    }
  }

  // ---- sessions ------------------------------------------------------------------------------

  #assign(
    params: SessionAssignParams,
    reply: ReplyHooks,
  ): SessionAssignResult | Promise<SessionAssignResult> {
    const accepted: SessionAssignResult = { session_id: params.session_id, accepted: true };
    const sessions = this.sessions;
    const existing = sessions.get(params.session_id);
    if (existing) {
      // A repeat (a retry after a reconnect) gets the first's answer: at once once it is
      // accepted, or when its handlers settle; one still ending must wait.
      const settling = this.#settingUp.get(existing);
      if (settling) return settling;
      if (sessions.isLive(existing)) return accepted;
      throw new UnavailableError("the session is ending", { reason: "session_ending" });
    }
    if (this.draining) throw new UnavailableError("draining", { reason: "draining" });
    const max = this.options.maxSessions;
    if (max !== undefined && sessions.size >= max) {
      throw new ResourceExhaustedError(`at most ${max} sessions`, { reason: "max_sessions" });
    }
    for (const tool of params.tools ?? []) {
      if (!this.registry.servedTool(tool)) {
        throw new CapabilityMissingError(`tool ${echoed(tool)} is not served`, {
          reason: "capability_missing",
          capability: `tool:${echoed(tool)}`,
        });
      }
    }
    const session = sessions.add(params);
    if (this.assignHandlers.size === 0) {
      // Nothing to set up: ready right after the answer.
      reply.afterReply(() => {
        sessions.markAccepted(session);
        this.sessionReady(session.id).catch((error) =>
          this.logger.debug("session.ready not delivered", { error: describeError(error) })
        );
      });
      return accepted;
    }
    const settling = (async () => {
      const bound = new AbortController();
      try {
        await Promise.race([
          (async () => {
            for (const handler of [...this.assignHandlers]) await handler(session, params);
          })(),
          sleep(this.clock, this.assignTimeoutMs, bound.signal).then(() => {
            throw new UnavailableError(
              `the session's set-up took over ${this.assignTimeoutMs} ms`,
              { reason: "setup_timeout" },
            );
          }),
        ]);
      } catch (error) {
        // The session's signal tells a handler still running that its session is gone.
        sessions.remove(session, error);
        throw error;
      } finally {
        bound.abort();
        this.#settingUp.delete(session);
      }
      // session.ready may follow only once the answer is written.
      reply.afterReply(() => sessions.markAccepted(session));
      return accepted;
    })();
    this.#settingUp.set(session, settling);
    return settling;
  }

  #stopSession(params: SessionStopParams): SessionStopResult {
    const session = this.sessions.get(params.session_id);
    if (!session) return { stopping: false };
    const handlers = [...this.stopHandlers];
    void this.sessions.end(session, {
      reason: params.reason ?? "stopped",
      graceMs: params.grace_ms ?? this.sessionGraceMs,
      notify: true,
      before: async () => {
        for (const handler of handlers) await handler(session, params);
      },
    });
    return { stopping: true };
  }

  /** Reports a session ready once its assignment is answered, until `session.ready` is accepted. */
  async sessionReady(sessionId: string): Promise<void> {
    const session = this.sessions.get(sessionId);
    if (!session) throw new UnknownSessionError(sessionId);
    await this.sessions.accepted(session);
    await deliver(this.link, "session.ready", { session_id: sessionId }, this.delivery);
    this.sessions.markReady(session);
  }

  /** Ends a held session with the client's grace period; `notify` sends `session.ended`. */
  endSession(session: ExecutorSession, reason: string, notify: boolean): Promise<void> {
    return this.sessions.end(session, { reason, graceMs: this.sessionGraceMs, notify });
  }

  /** Starts draining (once): no new sessions; the drain handlers run. */
  startDrain(info: DrainInfo): void {
    if (this.draining) return;
    this.draining = true;
    this.logger.info("draining: no new sessions", { source: info.source });
    for (const handler of [...this.drainHandlers]) {
      Promise.resolve().then(() => handler(info)).catch((error) =>
        this.logger.warn("drain handler failed", { error: describeError(error) })
      );
    }
  }

  // ---- shutdown ------------------------------------------------------------------------------

  /**
   * Waits for current work — running calls, pending results, every session's events — for up
   * to `graceMs`, or until `cut` aborts.
   */
  async settle(graceMs: number, cut: AbortSignal): Promise<void> {
    await Promise.race([
      (async () => {
        await this.calls.allSettled();
        await this.results.idle();
        await Promise.all(this.sessions.ids().map((id) => this.events.idle(id)));
      })(),
      sleep(this.clock, graceMs, cut).catch(() => {}),
    ]);
  }

  /**
   * Gives up on all work: running calls are aborted, pending results and events fail, whoever
   * waits for a connection is refused; resolves once every session has ended (without
   * `session.ended`: the harness ends them with the executor).
   */
  async close(): Promise<void> {
    const stopped = new ClientStoppedError();
    this.calls.abortAll("the executor is stopping");
    this.results.close(stopped);
    this.events.close(stopped);
    this.link.refuseWaiting(stopped);
    await Promise.all(
      this.sessions.all().map((session) => this.endSession(session, "client_stopped", false)),
    );
  }

  /**
   * The harness closed a connection with 1009: it accepts less than the longest frame sent there
   * (`longest` UTF-16 code units, so at least as many bytes). Frames that long are not sent
   * again: sent again, the same frame would be refused again, on every reconnect. A 1009 after
   * no frame of {@linkcode MIN_LOWERED_SEND_BYTES} was sent changes nothing: it was not about
   * one of ours.
   */
  harnessRefusedFrame(longest: number): void {
    const limit = Math.min(this.maxSendBytes, longest) - 1;
    if (limit < MIN_LOWERED_SEND_BYTES || limit >= this.maxSendBytes) return;
    this.maxSendBytes = limit;
    this.logger.warn(
      "the harness accepts smaller frames than this executor sent: larger ones are refused here",
      {
        max_send_bytes: limit,
      },
    );
  }

  // ---- the extension seam --------------------------------------------------------------------

  #extensionHost(): ExecutorExtensionHost {
    const { sessions, scrubber } = this;
    return {
      clock: this.clock,
      logger: this.logger,
      random: this.random,
      retry: this.retry,
      requestTimeoutMs: this.requestTimeoutMs,
      maxFrameBytes: this.maxFrameBytes,
      openSession: (sessionId) => {
        const session = sessions.add({ session_id: sessionId, metadata: { source: "harness" } });
        sessions.markAccepted(session);
        sessions.markReady(session);
        return session;
      },
      endSession: (session, reason, notify) => this.endSession(session, reason, notify),
      contributeCapabilities: (source) => {
        this.#contributions.add(source);
        this.capabilitiesChanged();
        return {
          dispose: () => {
            if (this.#contributions.delete(source)) this.capabilitiesChanged();
          },
        };
      },
      addSecret: (secret) => scrubber.add(secret),
      scrub: (text) => scrubber.scrub(text),
      telemetry: this.telemetry,
    };
  }
}

function checkOptions(options: ExecutorClientOptions): void {
  if (!options || typeof options !== "object") {
    throw new ExecutorConfigError("ExecutorClient needs options");
  }
  const info = options.executor;
  if (!info || !info.name || !info.os || !info.arch || !info.version) {
    throw new ExecutorConfigError("executor needs name, os, arch and version");
  }
  checkHooks(options);
  checkUrls(options);
  if (
    options.maxSessions !== undefined &&
    (!Number.isInteger(options.maxSessions) || options.maxSessions < 1)
  ) {
    throw new ExecutorConfigError("maxSessions must be a positive integer");
  }
  const running = options.maxRunningToolCalls;
  if (running !== undefined && (!Number.isSafeInteger(running) || running < 1)) {
    throw new ExecutorConfigError("maxRunningToolCalls must be a positive integer");
  }
  const queued = options.maxQueuedToolCalls;
  if (queued !== undefined && (!Number.isSafeInteger(queued) || queued < 0)) {
    throw new ExecutorConfigError("maxQueuedToolCalls must be an integer of 0 or more");
  }
  const connectTimeout = options.connectTimeoutMs;
  if (connectTimeout !== undefined && !(isTimerSpan(connectTimeout) && connectTimeout > 0)) {
    throw new ExecutorConfigError("connectTimeoutMs must be a positive number of ms");
  }
  // A negative or non-number span would fire at once or never, and one beyond a timer's
  // 2^31 − 1 ms fires at once on Node and Bun.
  for (const name of SPANS) {
    const ms = options[name];
    if (ms !== undefined && !isTimerSpan(ms)) {
      throw new ExecutorConfigError(`${name} must be a number of ms from 0 to ${MAX_TIMEOUT_MS}`);
    }
  }
  for (const name of ["reconnect", "retry"] as const) {
    const problem = backoffPolicyProblem(options[name]);
    if (problem !== undefined) throw new ExecutorConfigError(`${name}: ${problem}`);
  }
  const frame = options.maxFrameBytes;
  if (frame !== undefined && !(Number.isSafeInteger(frame) && frame >= 1)) {
    throw new ExecutorConfigError("maxFrameBytes must be a positive integer");
  }
  for (const name of ["inlineResultBytes", "eventWindow"] as const) {
    const n = options[name];
    if (n !== undefined && !(Number.isSafeInteger(n) && n >= 0)) {
      throw new ExecutorConfigError(`${name} must be an integer of 0 or more`);
    }
  }
}

/**
 * The options the client calls: found out only when first called (a logger at `start()`, a
 * clock at the first timer), they would end the process there instead of being refused here.
 */
function checkHooks(options: ExecutorClientOptions): void {
  if (options.logger !== undefined && !isLogger(options.logger)) {
    throw new ExecutorConfigError("logger must have debug, info, warn and error functions");
  }
  const clock = options.clock as unknown as Record<string, unknown> | null | undefined;
  if (
    clock !== undefined &&
    (clock === null || typeof clock !== "object" ||
      CLOCK_METHODS.some((method) => typeof clock[method] !== "function"))
  ) {
    throw new ExecutorConfigError("clock must have now, setTimeout and clearTimeout functions");
  }
  for (const name of FUNCTIONS) {
    const value = options[name] as unknown;
    if (value !== undefined && typeof value !== "function") {
      throw new ExecutorConfigError(`${name} must be a function`);
    }
  }
}

const CLOCK_METHODS = ["now", "setTimeout", "clearTimeout"] as const;
const FUNCTIONS = ["random", "dial", "fetch", "onToolResultLost", "socketFetch"] as const;

/**
 * `harnessUrl` is text (what it may be is the dialer's to say: the runtime's, or the caller's
 * own), and `baseUrl` an origin the token exchange can fetch (`ftp://…` or `"not a url"` would be
 * found out only at the first fetch).
 */
function checkUrls(options: ExecutorClientOptions): void {
  for (const name of ["harnessUrl", "baseUrl"] as const) {
    const value = options[name] as unknown;
    if (value !== undefined && typeof value !== "string") {
      throw new ExecutorConfigError(`${name} must be a string`);
    }
  }
  const baseUrl = options.baseUrl;
  if (baseUrl && !FETCHED.has(schemeOf(baseUrl.trim()))) {
    throw new ExecutorConfigError("baseUrl must be an http:// or https:// URL");
  }
}

const FETCHED: ReadonlySet<string> = new Set(["http:", "https:"]);

/** The URL's scheme (`"ws:"`), `""` for text that is no URL. */
function schemeOf(url: string): string {
  try {
    return new URL(url).protocol;
  } catch {
    return "";
  }
}

/** The options that are spans of time (`0`: none, or for a request's timeout, forever). */
const SPANS = [
  "tokenRefreshLeadMs",
  "requestTimeoutMs",
  "sessionGraceMs",
  "cleanupTimeoutMs",
  "assignTimeoutMs",
] as const;

/**
 * The credentials from the options. Without any credential the client can still `listen()` (a
 * dialing harness needs none), so the error is kept for `start()` instead of thrown.
 */
function credentialsOf(
  options: ExecutorClientOptions,
  clock: Clock,
  scrubber: SecretScrubber,
): { credentials: Credentials; missing?: ExecutorConfigError } {
  const deps = { fetch: options.fetch, clock, scrubber };
  const none = options.tokenSource === undefined && options.machineToken === undefined &&
    options.environmentKey === undefined && options.token === undefined && !options.harnessUrl;
  if (!none) return { credentials: createCredentials(options, deps) };
  try {
    return { credentials: createCredentials(options, deps) };
  } catch (error) {
    if (!(error instanceof ExecutorConfigError)) throw error;
    return {
      missing: error,
      credentials: {
        scope: "local",
        environmentId: options.environmentId ?? (options.machineId ? "" : LOCAL_ENVIRONMENT_ID),
        machineId: options.machineId,
        baseUrl: options.baseUrl ? normalizeBaseUrl(options.baseUrl) : undefined,
        refreshable: false,
        fetchToken: () => Promise.reject(error),
      },
    };
  }
}
