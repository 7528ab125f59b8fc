/**
 * What an {@linkcode ExecutorClient} is made with, and the handlers it takes: the public types
 * of the client's face, kept apart so the face's file holds only its methods.
 */
import type {
  Capabilities,
  ExecutorInfo,
  SessionAssignParams,
  SessionStopParams,
  ToolResultParams,
} from "../protocol/generated/contract.ts";
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import type { TelemetryOption } from "../protocol/telemetry.ts";
import type { Dialer } from "../transport/transport.ts";
import type { WebSocketServe } from "../transport/server.ts";
import type { ExecutorSession } from "./sessions.ts";
import type { BackoffPolicy } from "./timing.ts";

/**
 * What a custom {@linkcode TokenSource} resolves to. Anything else (a bare string, no `token`,
 * no `url`, an `expiresAt` that is no time) makes `start()` reject with
 * `InvalidTokenSourceResultError` at once: a wrong shape is never retried.
 */
export interface TokenSourceResult {
  /** The token the harness's `authenticate` checks (an executor JWT, an opaque key, ...). */
  token: string;
  /**
   * Its expiry: a Date, ms since the epoch, or an ISO 8601 string. The client asks the source
   * again `tokenRefreshLeadMs` before it, and extends the connection with the fresh token.
   */
  expiresAt: Date | number | string;
  /** The channel URL to dial with it (`ws://`, `wss://`, `unix:///path.sock`); `harnessUrl` wins. */
  url: string;
}

/**
 * A custom credential: a function the client calls for a fresh token before each connection and
 * before the token expires. It carries its own channel URL. A source that throws is retried
 * with backoff (throw `CredentialRejectedError` to stop the client for good); one that resolves
 * to the wrong shape stops it at once (`InvalidTokenSourceResultError`).
 *
 * ```ts
 * const client = new ExecutorClient({
 *   environmentId: "env_1",
 *   // Your own identity service issues short-lived tokens for the harness's `authenticate`.
 *   tokenSource: async ({ signal }) => {
 *     const response = await fetch("https://id.example.com/executor-token", { signal });
 *     const { jwt, expires_at } = await response.json();
 *     return { token: jwt, expiresAt: expires_at, url: "wss://harness.example.com" };
 *   },
 *   executor: { name: "builder-7", os: "linux", arch: "x64", version: "1.0.0" },
 * });
 * ```
 */
export type TokenSource = (options: { signal: AbortSignal }) => Promise<TokenSourceResult>;

/** The fetch function the client uses (web-standard; injectable for tests and runtimes). */
export type FetchFunction = (
  input: string | URL | Request,
  init?: RequestInit,
) => Promise<Response>;

/**
 * Sends an HTTP request over a local socket (a Unix socket path or a Windows named pipe) and
 * resolves with the response: runtime code, which the runtime presets inject
 * (`fetchOverSocket` of `transport/http-socket.node.ts`).
 */
export type SocketFetch = (socketPath: string, request: Request) => Promise<Response>;

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
  /**
   * Your own credential: returns a fresh token with its channel URL on every call (see
   * {@linkcode TokenSource} for an example). For a token that does not change, `token`.
   */
  tokenSource?: TokenSource;
  /**
   * A token that does not change, for a harness whose `authenticate` checks it: sent to
   * `harnessUrl` (required) as `Authorization: Bearer <token>` on every connection, and with
   * artifact uploads. Held in memory only and never logged; never refreshed (a harness that
   * lets it expire closes with 4001, and the client reconnects with the same token). Not with
   * `tokenSource`, `machineToken` or `environmentKey`.
   *
   * ```ts
   * const client = new ExecutorClient({
   *   harnessUrl: "wss://harness.example.com",
   *   token: process.env.HARNESS_TOKEN!, // e.g. read from a secret store
   *   environmentId: "env_1", // as the harness's authenticate binds the token
   *   executor: { name: "builder-7", os: "linux", arch: "x64", version: "1.0.0" },
   * });
   * ```
   */
  token?: string;
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
   * Most tool handlers running at once. A call beyond it is acknowledged and waits for a slot,
   * first come first served (the time it waits counts toward its `timeout_ms`; a cancel or its
   * session's end reports it at once). Default {@linkcode DEFAULT_MAX_RUNNING_TOOL_CALLS}.
   */
  maxRunningToolCalls?: number;
  /**
   * Most tool calls waiting for a slot; beyond it `tool.call` is refused with -32009
   * (`data.reason` `too_many_tool_calls`), before any ack. Default
   * {@linkcode DEFAULT_MAX_QUEUED_TOOL_CALLS}.
   */
  maxQueuedToolCalls?: number;
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
  /**
   * Reconnect backoff. Default 250 ms doubling to 30 s, jitter 0.5. Once registered, no wait is
   * longer than the harness's heartbeat interval (the lease that keeps the executor's sessions
   * is two), whatever the cap here.
   */
  reconnect?: BackoffPolicy;
  /** Backoff of retried deliveries (`tool.result`, `session.ended`, events). Default 250 ms to 10 s. */
  retry?: BackoffPolicy;
  /** Refresh the JWT this long before it expires. Default 60 s. */
  tokenRefreshLeadMs?: number;
  /** Timeout of each request the client sends. Default 30 s. */
  requestTimeoutMs?: number;
  /**
   * How long a connection attempt's token exchange, and then its WebSocket dial, may take before
   * the attempt is abandoned (`ConnectTimeoutError`, logged) and tried again. Default: the
   * heartbeat interval the harness gave at the latest registration (at least 2 s), 30 s before
   * the first.
   */
  connectTimeoutMs?: number;
  /** Frame size limit. Default 16 MiB. */
  maxFrameBytes?: number;
  /** Time between SIGTERM and SIGKILL for a session's cleanup, unless `session.stop` says. Default 5 s. */
  sessionGraceMs?: number;
  /**
   * How long cleanup hooks may outlast the grace period before that is reported (a warning).
   * A client stop then lets the session go; `session.ended` still waits for them, since it tells
   * the harness that nothing of the session goes on (the harness ends a stop it waits for after
   * its own timeout, `stop_timeout`). Default 5 s.
   */
  cleanupTimeoutMs?: number;
  /**
   * How long the `onSessionAssign` handlers may take: past it the assignment is refused -32004
   * (`data.reason` `setup_timeout`), the slot is freed and the session's `signal` aborts (a
   * handler still running sees it). Keep it under the harness's request timeout (60 s by
   * default), which ends the harness's wait for the answer. Default 60 s.
   */
  assignTimeoutMs?: number;
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
  /**
   * OpenTelemetry tracing: the `@opentelemetry/api` module (`import * as otel from
   * "@opentelemetry/api"`; spans go to its global provider), or `{ api, tracerProvider }` for a
   * provider of this client's own. The client then opens server spans `session.assign`,
   * `tool.call <name>` and `turn.start`, each a child of the context the request carried
   * (`params._meta.traceparent`), and hands the span's own context to the handler
   * (`ctx.trace`) and the commands it runs (`TRACEPARENT`). Default: none — the SDK never
   * loads `@opentelemetry/api` itself.
   */
  telemetry?: TelemetryOption;
}

/** Called with a tool result the client gave up on, and why. */
export type ToolResultLostHandler = (result: ToolResultParams, error: unknown) => void;

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
  /** Aborts waiting (for a connection, or for the answer): rejects with `RequestAbortedError`. */
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
  /**
   * Stops waiting for the stop to finish (rejects with `RequestAbortedError`); the client still
   * stops (`closed` settles when it has). An already-aborted signal starts no stop.
   */
  signal?: AbortSignal;
}
