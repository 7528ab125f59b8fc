/**
 * The life of the executor's connection: obtain a fresh token, dial offering both subprotocols,
 * register, serve until the connection ends, then decide by close code whether to reconnect
 * (with exponential backoff, jitter and a cap) or stop for good.
 *
 * Stop for good: a received `executor.close`, close codes the contract marks `reconnect: false`
 * (1000, 1008, 4002, 4003, 4004), a refused credential (HTTP 401 at the token endpoint or the
 * upgrade), an upgrade or a token exchange answered as no harness does before the first
 * registration (HTTP 404, a 200: `upgrade-verdict.ts`, `credentials.ts`), and a refused registration (-32010, -32012, -32001,
 * -32602). Everything else — 1001, 1009, 1011, 4001, 4005, network failures, 5xx, unknown codes
 * — reconnects.
 */
import type { Clock } from "../protocol/clock.ts";
import {
  ConnectionClosedError,
  InvalidOutgoingParamsError,
  ProtocolError,
} from "../protocol/errors.ts";
import { type ExecutorRegisterResult, PROTOCOLS } from "../protocol/generated/contract.ts";
import { CLOSE_CODES, CloseCode, ErrorCode } from "../protocol/generated/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Peer } from "../protocol/peer.ts";
import {
  ABNORMAL_CLOSURE,
  type CloseInfo,
  type Dialer,
  DialError,
  type Transport,
} from "../transport/transport.ts";
import type { Credentials, ExecutorToken } from "./credentials.ts";
import {
  ClientStoppedError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  CredentialRejectedError,
  displayUrl,
  errorCause,
  ExecutorConfigError,
  NotAHarnessError,
} from "./errors.ts";
import { upgradeVerdict } from "./upgrade-verdict.ts";
import { linkedSignal } from "../protocol/abort.ts";
import { UnsupportedUrlError } from "../transport/dial-url.ts";
import { backoffDelay, type BackoffPolicy, deferred, describeError, sleep } from "./timing.ts";

/** Where the client is. */
export type ClientState =
  | "idle"
  | "connecting"
  | "connected"
  | "waiting"
  | "stopping"
  | "stopped";

/** Why the client stopped for good. */
export type StopReason =
  /** `stop()` was called. */
  | "stopped"
  /** The harness sent `executor.close`. */
  | "executor_close"
  /** The harness closed with a code that forbids reconnecting (`code` says which). */
  | "close_code"
  /** The token endpoint refused the credential. */
  | "credential_rejected"
  /** The harness refused the WebSocket upgrade (HTTP 401/403). */
  | "connection_refused"
  /** The URL answered as no harness does (HTTP 404, a 200 without an upgrade, ...). */
  | "not_a_harness"
  /** The harness refused `executor.register` (-32010, -32012, -32001, -32602). */
  | "register_refused"
  /** The client's configuration cannot work. */
  | "config";

/** How the client ended, as `client.closed` reports it. */
export interface ExecutorClosedInfo {
  /** Why. */
  readonly reason: StopReason;
  /** The WebSocket close code, when a close ended it. */
  readonly code?: number;
  /** The error behind it, when there is one. */
  readonly error?: Error;
}

/** A registered connection. */
export interface Connection {
  readonly peer: Peer;
  readonly token: ExecutorToken;
  readonly registration: ExecutorRegisterResult;
  /** The harness sent `executor.close` on it: no reconnect, whatever close follows. */
  executorCloseReceived: boolean;
}

/** What the loop drives: it registers each connection, and tells of its start and end. */
export interface ConnectionHost<C extends Connection> {
  /** Builds the peer on the transport and sends `executor.register`; resolves once registered. */
  register(transport: Transport, token: ExecutorToken, signal: AbortSignal): Promise<C>;
  /** A connection is registered. */
  connected(connection: C): void;
  /** The registered connection ended. */
  disconnected(connection: C, info: CloseInfo): void;
  /** The loop moved to another state. */
  state(state: ClientState): void;
}

/** What the loop needs. */
export interface ConnectionLoopOptions<C extends Connection> {
  clock: Clock;
  logger: Logger;
  random: () => number;
  backoff: BackoffPolicy;
  credentials: Credentials;
  dial: Dialer;
  maxFrameBytes: number;
  /** See `ExecutorClientOptions.connectTimeoutMs`; undefined: the default. */
  connectTimeoutMs: number | undefined;
  host: ConnectionHost<C>;
}

/** The deadline of an attempt's token exchange and dial before the first registration. */
export const FIRST_CONNECT_TIMEOUT_MS = 30_000;
/** The least deadline derived from a harness's heartbeat interval. */
export const MIN_CONNECT_TIMEOUT_MS = 2_000;
/** The least cap the harness's heartbeat interval puts on the reconnect backoff. */
const MIN_BACKOFF_CAP_MS = 1_000;
/** How long a connection must last after its registration for its close not to count as a failure. */
const SHORT_LIVED_MS = 1_000;

/** Runs connection attempts until stopped. */
export class ConnectionLoop<C extends Connection> {
  /** Settles when the loop has ended for good. */
  readonly finished: Promise<ExecutorClosedInfo>;
  readonly #options: ConnectionLoopOptions<C>;
  readonly #controller = new AbortController();
  readonly #first = deferred<C>();
  readonly #finished = deferred<ExecutorClosedInfo>();
  /** Resolves the race for the current connection when this side drops it. */
  #dropCurrent: (() => void) | undefined;
  #current: C | undefined;
  #halted = false;
  /** What the current attempt is doing, and the URL it is doing it with (for its log line). */
  #stage: "token" | "dial" | "register" = "token";
  #target = "";
  /** The heartbeat interval the harness gave at the latest registration. */
  #heartbeatIntervalMs: number | undefined;
  #lastFailure: unknown = undefined;

  constructor(options: ConnectionLoopOptions<C>) {
    this.#options = options;
    this.finished = this.#finished.promise;
    // start() may never be awaited by anyone after a fatal end; do not report it as unhandled.
    this.#first.promise.catch(() => {});
  }

  /** Starts the loop; resolves with the first registered connection. */
  start(): Promise<C> {
    void this.#run().catch((error) => {
      this.#options.logger.error("connection loop failed", { error: describeError(error) });
      this.#end({ reason: "config", error: error instanceof Error ? error : undefined });
    });
    return this.#first.promise;
  }

  /**
   * Why the latest attempt failed, while none has succeeded since (undefined once registered):
   * what a caller that stops waiting for the first registration is told.
   */
  get lastFailure(): unknown {
    return this.#lastFailure;
  }

  /** Stops attempting: aborts a dial or a backoff wait; the current connection is left to the caller. */
  halt(): void {
    if (this.#halted) return;
    this.#halted = true;
    this.#controller.abort(new ClientStoppedError());
    this.#dropCurrent?.();
  }

  /** Drops the current connection (e.g. dead heartbeats) and reconnects without waiting for its close. */
  abandon(connection: C, why: string): void {
    if (this.#current !== connection) return;
    this.#options.logger.warn("dropping the connection", { why });
    try {
      connection.peer.close(1001, why);
    } catch {
      // Already closing.
    }
    this.#dropCurrent?.();
  }

  async #run(): Promise<void> {
    let failures = 0;
    /**
     * Connections in a row the harness closed with 1009 (a frame over its limit): the wait
     * before the next grows with them, a registration between does not reset it, since the
     * frame may be sent again (1009 is "reconnect with backoff").
     */
    let tooBig = 0;
    /**
     * Connections in a row the harness closed within {@linkcode SHORT_LIVED_MS} of registering
     * them: a harness that registers and then closes each connection (a crash loop) gets a wait
     * that grows with them, as failed attempts do, instead of a reconnect at the first delay
     * every time. A network failure (1006, no close frame) is not counted: the executor comes
     * back at once after a cut, however recent its registration.
     */
    let shortLived = 0;
    /** Whether a connection was registered: an answer as no harness gives is final only before. */
    let registered = false;
    while (!this.#halted) {
      this.#options.host.state("connecting");
      let connection: C;
      try {
        connection = await this.#attempt();
      } catch (error) {
        if (this.#halted) break;
        this.#lastFailure = error;
        const found = fatalAttemptError(error, this.#target);
        // Once registered, a 404 or a web page where the harness was is a deployment in motion
        // (an ingress without its route yet), not a mistyped URL: it is waited out.
        const fatal = registered && found?.reason === "not_a_harness" ? undefined : found;
        if (fatal) {
          this.#options.logger.error("connection refused for good", {
            url: displayUrl(this.#target),
            reason: fatal.reason,
            error: describeError(error),
          });
          this.#end(fatal);
          return;
        }
        failures++;
        const delay = this.#delay(failures);
        // Where, why (the errno behind it when there is one) and when the next attempt is: an
        // executor whose harness is down says so, and how long until it tries again.
        this.#options.logger.warn("connection attempt failed: retrying", {
          url: displayUrl(this.#target),
          stage: this.#stage,
          cause: errorCause(error),
          retry_in_ms: delay,
          attempt: failures,
          error: describeError(error),
        });
        if (!(await this.#wait(delay))) break;
        continue;
      }
      failures = 0;
      registered = true;
      this.#lastFailure = undefined;
      this.#current = connection;
      this.#heartbeatIntervalMs = connection.registration.heartbeat_interval_ms;
      const registeredAt = this.#options.clock.now();
      this.#options.host.state("connected");
      this.#first.resolve(connection);
      this.#options.host.connected(connection);
      let droppedHere = false;
      const dropped = new Promise<CloseInfo>((resolve) => {
        this.#dropCurrent = () => {
          droppedHere = true;
          resolve({ code: 1001, reason: "dropped by the executor" });
        };
      });
      const info = await Promise.race([connection.peer.closed, dropped]);
      this.#dropCurrent = undefined;
      this.#current = undefined;
      this.#options.host.disconnected(connection, info);
      if (this.#halted) break;
      if (!droppedHere) {
        const stop = closeDecision(connection, info);
        if (stop) {
          this.#options.logger.warn("the harness ended the connection for good", {
            code: info.code,
            reason: stop.reason,
          });
          this.#end(stop);
          return;
        }
      }
      tooBig = info.code === CloseCode.MESSAGE_TOO_BIG ? tooBig + 1 : 0;
      const lived = this.#options.clock.now() - registeredAt;
      const closedByHarness = !droppedHere && info.code !== ABNORMAL_CLOSURE;
      shortLived = closedByHarness && lived < SHORT_LIVED_MS ? shortLived + 1 : 0;
      const delay = this.#delay(Math.max(1, tooBig, shortLived));
      if (tooBig > 0) {
        this.#options.logger.warn("the harness refused a frame over its size limit (1009)", {
          in_a_row: tooBig,
          retry_in_ms: delay,
        });
      }
      this.#options.logger.info("connection closed: reconnecting", {
        url: displayUrl(connection.token.url),
        code: info.code,
        ...(info.reason ? { reason: info.reason } : {}),
        retry_in_ms: delay,
      });
      if (!(await this.#wait(delay))) break;
    }
    this.#end({ reason: "stopped" });
  }

  async #attempt(): Promise<C> {
    const stop = this.#controller.signal;
    const { credentials, dial, maxFrameBytes, clock } = this.#options;
    // The token exchange and the dial end by a deadline: a harness that accepts a connection
    // and never answers (frozen, or a kept-alive HTTP connection to one that is gone) would
    // otherwise hold the attempt, and the executor's lease with it, for ever.
    const timeoutMs = this.#connectTimeoutMs();
    const deadline = new AbortController();
    const timer = clock.setTimeout(
      () =>
        deadline.abort(
          new ConnectTimeoutError(this.#stage === "dial" ? "dial" : "token", timeoutMs),
        ),
      timeoutMs,
    );
    const linked = linkedSignal([stop, deadline.signal]);
    const signal = linked.signal;
    let token: ExecutorToken;
    let transport: Transport;
    try {
      this.#stage = "token";
      this.#target = credentials.baseUrl ?? "";
      token = await credentials.fetchToken(signal);
      const headers: Record<string, string> = {};
      if (token.token) headers.authorization = `Bearer ${token.token}`;
      this.#stage = "dial";
      this.#target = token.url;
      this.#options.logger.debug("connecting", { url: displayUrl(token.url) });
      transport = await dial(token.url, {
        protocols: [...PROTOCOLS],
        headers,
        signal,
        maxFrameBytes,
      });
    } catch (error) {
      // A dial aborted by the deadline says so, not "aborted".
      if (deadline.signal.aborted && !stop.aborted) throw deadline.signal.reason;
      throw error;
    } finally {
      clock.clearTimeout(timer);
      linked.release();
    }
    if (stop.aborted) {
      transport.close(1000, "executor stopping");
      throw stop.reason;
    }
    this.#stage = "register";
    try {
      return await this.#options.host.register(transport, token, stop);
    } catch (error) {
      try {
        transport.close(1000, "registration failed");
      } catch {
        // Already closed.
      }
      throw error;
    }
  }

  /**
   * The deadline of a token exchange or a dial: as given, else one heartbeat interval of the
   * harness (at least {@linkcode MIN_CONNECT_TIMEOUT_MS}; a harness that does not answer within
   * it would have missed a heartbeat), else {@linkcode FIRST_CONNECT_TIMEOUT_MS}.
   */
  #connectTimeoutMs(): number {
    const given = this.#options.connectTimeoutMs;
    if (given !== undefined) return given;
    const interval = this.#heartbeatIntervalMs;
    return interval === undefined
      ? FIRST_CONNECT_TIMEOUT_MS
      : Math.max(interval, MIN_CONNECT_TIMEOUT_MS);
  }

  /**
   * The backoff delay before retry number `attempt`: once registered, at most the harness's
   * heartbeat interval (or {@linkcode MIN_BACKOFF_CAP_MS}, whichever is longer). The harness keeps the executor's sessions and pending calls for its lease
   * (two intervals, from its own start when it is the harness that restarted): a wait longer
   * than an interval could let the lease run out between two attempts, though the harness was
   * back in time.
   */
  #delay(attempt: number): number {
    const policy = this.#options.backoff;
    // Never under MIN_BACKOFF_CAP_MS: a harness that hands out a heartbeat of 1 ms would
    // otherwise turn the backoff off (its lease of 2 ms cannot be kept across a reconnect anyway).
    const interval = this.#heartbeatIntervalMs === undefined
      ? undefined
      : Math.max(this.#heartbeatIntervalMs, MIN_BACKOFF_CAP_MS);
    // The interval caps the delay as the policy's own cap does: before the jitter, which keeps
    // executors cut off together from coming back together.
    const capped = interval === undefined || (policy.maxDelayMs ?? Infinity) <= interval
      ? policy
      : { ...policy, maxDelayMs: interval };
    return backoffDelay(capped, attempt, this.#options.random);
  }

  /** Waits `delay` ms; false when halted meanwhile. */
  async #wait(delay: number): Promise<boolean> {
    if (this.#halted) return false;
    this.#options.host.state("waiting");
    try {
      await sleep(this.#options.clock, delay, this.#controller.signal);
      return !this.#halted;
    } catch {
      return false;
    }
  }

  #end(info: ExecutorClosedInfo): void {
    this.#halted = true;
    this.#first.reject(info.error ?? new ClientStoppedError());
    this.#finished.resolve(info);
  }
}

/** The stop decision for a connection that ended; undefined to reconnect. */
function closeDecision(connection: Connection, info: CloseInfo): ExecutorClosedInfo | undefined {
  if (connection.executorCloseReceived) return { reason: "executor_close", code: info.code };
  const spec = CLOSE_CODES.get(info.code);
  if (spec && !spec.reconnect) {
    return {
      reason: "close_code",
      code: info.code,
      error: new ConnectionClosedError(info.code, info.reason),
    };
  }
  return undefined;
}

const REGISTER_REFUSALS: ReadonlySet<number> = new Set([
  ErrorCode.PROTOCOL_MISMATCH,
  ErrorCode.CAPABILITY_MISSING,
  ErrorCode.FORBIDDEN,
  ErrorCode.INVALID_PARAMS,
]);

/** The stop decision for a failed attempt to reach `url`; undefined to retry. */
function fatalAttemptError(error: unknown, url: string): ExecutorClosedInfo | undefined {
  if (error instanceof CredentialRejectedError) return { reason: "credential_rejected", error };
  // The token endpoint's answer no harness gives (credentials.ts).
  if (error instanceof NotAHarnessError) return { reason: "not_a_harness", error };
  if (error instanceof DialError && error.status !== undefined) {
    const verdict = upgradeVerdict(error.status);
    if (verdict === "refused") {
      return {
        reason: "connection_refused",
        error: new ConnectionRefusedError(error.status, { cause: error }),
      };
    }
    if (verdict === "not_a_harness") {
      return {
        reason: "not_a_harness",
        error: new NotAHarnessError(displayUrl(url), error.status, { cause: error }),
      };
    }
  }
  // A URL no dialer opens, a socket path longer than the system takes (SocketPathTooLongError):
  // no retry changes either.
  if (
    error instanceof DialError &&
    (error.cause instanceof UnsupportedUrlError ||
      (error.cause as { code?: unknown })?.code === "ENAMETOOLONG")
  ) {
    return { reason: "config", error };
  }
  if (error instanceof ProtocolError && REGISTER_REFUSALS.has(error.code)) {
    return { reason: "register_refused", error };
  }
  if (error instanceof ConnectionClosedError) {
    const spec = CLOSE_CODES.get(error.code);
    if (spec && !spec.reconnect) return { reason: "close_code", code: error.code, error };
  }
  if (error instanceof ExecutorConfigError || error instanceof InvalidOutgoingParamsError) {
    return { reason: "config", error };
  }
  return undefined;
}
