/**
 * What a {@linkcode HarnessOptions} says: the options of a `Harness` (harness.ts) and of its
 * `serve` and `waitExecutor`, with the defaults they fall back on.
 *
 * @module
 */
import type { Clock } from "../protocol/clock.ts";
import { isTimerSpan, MAX_TIMEOUT_MS } from "../protocol/timeout-option.ts";
import { HarnessConfigError } from "./errors.ts";
import { isLogger, type Logger } from "../protocol/logger.ts";
import type { TelemetryOption } from "../protocol/telemetry.ts";
import type { Dialer, Transport } from "../transport/transport.ts";
import type { WebSocketServe } from "../transport/server.ts";
import type { ArtifactStore } from "./artifacts.ts";
import type { ConnectionSnapshot } from "./connection.ts";
import type { SessionEventSink } from "./event-log.ts";
import type { RecoveredLeases } from "./executors.ts";
import type { AgentExtension } from "./extension.ts";
import type { ExecutorHandle } from "./handles.ts";
import type { MetricsEndpointOptions } from "../http/metrics/endpoint.ts";
import type { Authenticate } from "./principal.ts";
import type { SchedulerDriver } from "./scheduler.ts";
import type { HarnessStore } from "./store/store.ts";
import type { HolderIdentity } from "./store/claim.ts";
import type { TokenEndpointOptions } from "../http/token-endpoint/token-issuer.ts";

/** The default heartbeat interval handed to executors: 15 s (the lease is twice that). */
export const DEFAULT_HEARTBEAT_INTERVAL_MS = 15_000;
/** The default largest artifact upload: 64 MiB. */
export const DEFAULT_MAX_ARTIFACT_BYTES = 64 * 1024 * 1024;
/** The default most bytes a harness holds unsent across its connections: 256 MiB. */
export const DEFAULT_MAX_UNSENT_BYTES = 256 * 1024 * 1024;
/** The default most connections that have not registered yet (authenticating included): 4,096. */
export const DEFAULT_MAX_UNREGISTERED_CONNECTIONS = 4_096;

/** Options of a `Harness`. */
export interface HarnessOptions {
  /**
   * Decides on each connection before the upgrade (refusal: HTTP 401, no socket), and verifies
   * refreshed tokens. The principal it returns is the executor's identity: what it may register
   * as is bound to it (see {@linkcode Authenticate} and `Principal`). Default: verify
   * the JWTs of the self-hosted token endpoint when `tokens` is set, else none — which only
   * `serveUnix`, `accept` and `insecureNoAuth` allow, and where what executors register as is
   * believed.
   */
  authenticate?: Authenticate;
  /** Serve TCP without `authenticate`: only on a network you trust completely. */
  insecureNoAuth?: boolean;
  /** Runs the self-hosted token endpoint (`POST /v1/.../token`) and verifies its JWTs. */
  tokens?: TokenEndpointOptions;
  /** Time and timers for leases, heartbeats and token deadlines. Default: the system clock. */
  clock?: Clock;
  /** Where diagnostics go (secret-named fields are redacted). Default: nowhere. */
  logger?: Logger;
  /** The heartbeat interval given to executors; two missed heartbeats expire the lease. */
  heartbeatIntervalMs?: number;
  /** Frames over this many bytes close the connection with 1009. Default 16 MiB. */
  maxFrameBytes?: number;
  /**
   * Frames nested deeper than this many levels of arrays and objects are refused (-32600
   * `too_deep`) and the connection stays. Default 128.
   */
  maxFrameDepth?: number;
  /**
   * Most bytes the harness holds unsent across all its executor connections: what executors
   * that read slower than it sends have not taken yet. Each connection is bounded on its own
   * (64 MiB, then closed with 1011); past this total, the connections that hold the most are
   * ended at once (1011, what they hold discarded; they reconnect and resume) until the rest
   * fit. Default 256 MiB ({@linkcode DEFAULT_MAX_UNSENT_BYTES}).
   */
  maxUnsentBytes?: number;
  /** Timeout of requests the harness sends (session.assign, tool.call acks, ...). Default 60 s. */
  requestTimeoutMs?: number;
  /** How long a connection may stay without `executor.register`. Default: two heartbeat intervals. */
  registerTimeoutMs?: number;
  /** Requests refused as `not_registered` before the connection is closed with 1008. Default 16. */
  maxUnregisteredRequests?: number;
  /**
   * Most connections that have not registered yet, counting upgrades being authenticated:
   * beyond it an upgrade is refused with HTTP 503 (`retry-after: 1`; executors retry with
   * backoff) before `authenticate` runs, while registered executors go on as before. Connections
   * from `accept` and `dial` count but are never refused. Default 4,096.
   */
  maxUnregisteredConnections?: number;
  /**
   * How long an accepted connection has to complete its request (an upgrade until its 101 is
   * out, an HTTP request until its headers are in) before the server closes it. Default 10 s.
   * Honoured by the `node:http` server (`harness/node.ts` on every runtime, and the TCP server
   * of `harness/deno.ts`); `Bun.serve` closes such connections after about 10 s by itself, and
   * `Deno.serve` (Unix sockets of `harness/deno.ts`) has no such deadline.
   */
  handshakeTimeoutMs?: number;
  /** The server factory used by `serve` / `serveUnix` (e.g. `serveWebSocket` of transport/node.ts). */
  server?: WebSocketServe;
  /** Opens connections for `Harness.dial` (the runtime presets provide it). */
  dial?: Dialer;
  /** Stores each accepted durable session event before it is acknowledged. */
  onSessionEvent?: SessionEventSink;
  /**
   * Most durable events a session keeps in memory (`session.events()`, `eventRecords`); beyond
   * it the oldest are dropped (`onSessionEvent` has stored every one). Default 10,000.
   */
  maxSessionEvents?: number;
  /**
   * Most bytes of durable events a session keeps in memory, counted as the size of the frames
   * that carried them; beyond it the oldest are dropped. Default 32 MiB.
   */
  maxSessionEventBytes?: number;
  /**
   * Where uploaded artifacts go. Default: in the harness's `store` when it claims one
   * (`StoreArtifactStore`: they survive a restart and a failover with the results that point at
   * them), else in memory (`MemoryArtifactStore`; also beside a Durable Object's storage).
   */
  artifacts?: ArtifactStore;
  /**
   * Most bytes the default artifact store holds at once. In the harness's store the oldest
   * artifacts are deleted to make room; in memory a new upload is refused (HTTP 507). Default
   * 1 GiB. (An `artifacts` store of your own has its own bounds.)
   */
  maxStoredArtifactBytes?: number;
  /** Largest artifact upload in bytes. Default 64 MiB. */
  maxArtifactBytes?: number;
  /** The default bma-file service URL for `executor.mount`. */
  fileServiceUrl?: string;
  /**
   * How many finished tool calls are remembered, at least, for idempotent repeats. Default
   * 10,000. In memory they are kept in two generations (the older dropped whole when the newer
   * fills), so up to twice as many are held; a store keeps exactly this many.
   */
  rememberToolCalls?: number;
  /**
   * Where the harness keeps what it must not lose: executors, sessions, tool calls and their
   * results, durable events, the agent capability's turns and interactions. Whatever the
   * harness acknowledges is in the store first. A harness started on the store a previous one
   * used (after a crash, a deploy) takes the executors' reconnects with `resume` and goes on
   * where that one stopped. On Node, Deno and Bun `openSqliteStore(path)` keeps it in a file;
   * `new MemoryHarnessStore()` in this process's memory (a harness made again on the same object
   * goes on too). The harness does not close it. Default: none — the harness's state lives in
   * its own memory only, gone with it: what a `MemoryHarnessStore` that no other harness opens
   * would keep, without the cost of writing it out on every tool call and event.
   */
  store?: HarnessStore;
  /**
   * How a harness started on a store sets the leases of the executors it reads back: `fresh`
   * (the default) gives each a full lease from now, so the harness's downtime counts against no
   * executor; `stored` continues the lease of an executor that had disconnected (an edge harness
   * made anew on every wake-up: an executor that never comes back still expires). See
   * {@linkcode RecoveredLeases}.
   */
  recoveredLeases?: RecoveredLeases;
  /**
   * Claim `store` even while another live harness holds it. That harness is fenced: none of its
   * writes is accepted from then on, and it closes its executors' connections (1001) so that
   * they reconnect, to this one when they can reach it. Default false: `new Harness` throws (or
   * `ready` rejects, on a store that answers with promises) `StoreHeldError`, naming the holder.
   * See `docs/store.md`, "One writer".
   */
  takeover?: boolean;
  /**
   * While another live harness holds `store`, wait for it instead of failing: `readiness` is
   * `standby` (and connect requests answer 503, so a load balancer sends executors to the
   * holder), and the harness claims the store once the holder let go or stopped renewing (after
   * three times `storeRenewMs`), then reads it back and serves. No takeover: the holder is
   * never fenced by a standby. Default false. See `docs/deploy.md`.
   */
  standby?: boolean;
  /**
   * Who this harness is in its store's holder record: host, pid, when its process started, and
   * how to tell whether a process of this machine runs. Default: this process, from the Node,
   * Deno and Bun entry points; elsewhere nothing is known, and a holder counts as gone only
   * once it stopped renewing its claim.
   */
  holderIdentity?: HolderIdentity;
  /**
   * How often the harness renews its claim on `store`, ms. A claim not renewed for three times
   * this counts as gone (a harness on another machine that died). Default 5000.
   */
  storeRenewMs?: number;
  /**
   * How many ended sessions the store remembers (their records, events and results, readable
   * through `harness.session(id)`); older ones are forgotten. Default 1,000.
   */
  rememberEndedSessions?: number;
  /**
   * Serves the agent capability: turns (`executor.startTurn`, ...), durable agent events and
   * their deltas, interactions, and model and tools tokens, through this capability
   * (`new AgentPlatform(options)` from `bma-executor-sdk/agent`).
   */
  agent?: AgentExtension;
  /**
   * Who wakes the harness's deadlines (leases, register and token deadlines, stop waits,
   * interaction expiries). Default: a timer of `clock`. A Durable Object passes its alarm and
   * calls `Harness.runDeadlines` from `alarm()`.
   */
  deadlines?: SchedulerDriver;
  /**
   * Told whenever a connection's state changes (registered, token refreshed, heartbeat): an
   * edge harness keeps the snapshot with the socket (a hibernatable WebSocket's attachment) and
   * gives it back to `Harness.restore` after an eviction.
   */
  onConnectionChange?: (transport: Transport, snapshot: ConnectionSnapshot) => void;
  /**
   * OpenTelemetry tracing: the `@opentelemetry/api` module (`import * as otel from
   * "@opentelemetry/api"`; spans go to its global provider), or `{ api, tracerProvider }` for a
   * provider of this harness's own. The harness then opens client spans `session.assign`,
   * `tool.call <name>` and `turn.start` (under the call's `trace`, else the active context) and
   * sends their context to the executor, and a span per store write (`store.write`). Default:
   * none — the SDK never loads `@opentelemetry/api` itself.
   */
  telemetry?: TelemetryOption;
  /**
   * Serves the harness's metrics (`Harness.metrics`) as OpenMetrics text at
   * `GET /metrics` on its HTTP side (`serve`, `fetch`), each scrape judged by `authorize`
   * (`metricsBearer(token)`; refused: 401). Default: not served (404).
   */
  metricsEndpoint?: MetricsEndpointOptions;
}

/** Where to listen with `Harness.serve`, and what answers its HTTP requests. */
export interface ServeOptions extends ServeUnixOptions {
  /** Default 127.0.0.1. */
  hostname?: string;
  /** Default 0 (a free port). */
  port?: number;
}

/** What answers the HTTP requests of `Harness.serveUnix`. */
export interface ServeUnixOptions {
  /**
   * Answers every HTTP request that is not a WebSocket upgrade: mount the harness's own
   * `Harness.fetch` in it beside routes of your own (a brain API, health checks). Default:
   * `harness.fetch`.
   */
  fetch?: (request: Request) => Response | Promise<Response>;
}

/** Options of `Harness.waitExecutor`. */
export interface WaitExecutorOptions {
  /** Stops waiting (rejects with `RequestAbortedError`). */
  signal?: AbortSignal;
  /** Which executor to wait for. Default: any connected executor that is not draining. */
  filter?: (executor: ExecutorHandle) => boolean;
}

/** The options that are spans of time, and whether 0 is one (a request's timeout: forever). */
const SPANS = {
  heartbeatIntervalMs: false,
  requestTimeoutMs: true,
  registerTimeoutMs: false,
  handshakeTimeoutMs: false,
  storeRenewMs: false,
} as const;

/** The options that are counts (of bytes, frames, records), and the least each can be. */
const COUNTS = {
  maxFrameBytes: 1,
  maxFrameDepth: 1,
  maxUnsentBytes: 0,
  maxUnregisteredRequests: 0,
  maxUnregisteredConnections: 0,
  maxSessionEvents: 0,
  maxSessionEventBytes: 0,
  maxArtifactBytes: 0,
  maxStoredArtifactBytes: 0,
  rememberToolCalls: 0,
  rememberEndedSessions: 0,
} as const;

/**
 * Throws {@linkcode HarnessConfigError} for an option that cannot work: a span that is negative,
 * not a number, 0 where that means nothing, or beyond a timer's 2^31 − 1 ms (which fires at once
 * on Node and Bun); a count that is not a whole number at least its least.
 */
export function checkHarnessOptions(options: HarnessOptions): void {
  const given = options as Record<string, unknown>;
  for (const [name, zeroOk] of Object.entries(SPANS)) {
    const ms = given[name];
    if (ms !== undefined && !(isTimerSpan(ms) && (zeroOk || ms > 0))) {
      throw new HarnessConfigError(
        name,
        `must be a number of ms from ${zeroOk ? 0 : "over 0"} to ${MAX_TIMEOUT_MS}`,
      );
    }
  }
  for (const [name, least] of Object.entries(COUNTS)) {
    const n = given[name];
    if (n !== undefined && !(Number.isSafeInteger(n) && (n as number) >= least)) {
      throw new HarnessConfigError(name, `must be an integer of ${least} or more`);
    }
  }
  // Called first from inside error handlers: a logger without its methods would end the
  // process there.
  if (given.logger !== undefined && !isLogger(given.logger)) {
    throw new HarnessConfigError("logger", "must have debug, info, warn and error functions");
  }
}
