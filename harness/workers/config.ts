/**
 * Configuration of the edge harness: what the Worker's environment (`wrangler.toml` vars and
 * secrets) holds, and the code-level options for what cannot be a string (a custom
 * `authenticate`, a logger, a routing rule).
 */
import { type Logger, redactingLogger, silentLogger } from "../../protocol/logger.ts";
import { systemClock } from "../../protocol/clock.ts";
import type { Authenticate, ConnectRequest, Principal } from "../principal.ts";
import {
  type ExecutorCredential,
  type TokenEndpointOptions,
  TokenIssuer,
} from "../token-endpoint.ts";
import type { DurableObjectNamespaceLike } from "./types.ts";

/**
 * The Worker's environment. Secrets (`BMA_JWT_SECRET`, `BMA_CREDENTIALS`, `BMA_BRAIN_TOKEN`)
 * belong in `wrangler secret put`, never in `wrangler.toml`; numbers arrive as strings.
 */
export interface HarnessEnv {
  /** The Durable Object namespace of {@linkcode HarnessObject} (the binding name is configurable). */
  BMA_HARNESS?: DurableObjectNamespaceLike;
  /** HS256 secret (≥ 32 bytes) of the self-hosted token endpoint; without it nothing connects. */
  BMA_JWT_SECRET?: string;
  /**
   * JSON array of the credentials the token endpoint exchanges:
   * `[{"environmentId":"env_1","environmentKey":"..."},{"machineId":"m_1","machineToken":"..."}]`.
   */
  BMA_CREDENTIALS?: string;
  /** Bearer token of the brain API; without it the brain API answers 401 to everyone. */
  BMA_BRAIN_TOKEN?: string;
  /** Heartbeat interval handed to executors, ms (the lease is twice that). Default 15000. */
  BMA_HEARTBEAT_INTERVAL_MS?: string;
  /** Lifetime of issued executor tokens, s. Default 300. */
  BMA_TOKEN_TTL_SECONDS?: string;
  /** `iss` of issued tokens. Default `bma-harness`. */
  BMA_TOKEN_ISSUER?: string;
  /** The `url` the token endpoint returns. Default: this Worker's `/v1/executors/connect`. */
  BMA_CONNECT_URL?: string;
  /** Frames over this many bytes close the connection with 1009. Default 1 MiB. */
  BMA_MAX_FRAME_BYTES?: string;
  /** How long the brain API waits for an executor's answer (assign, cancel, stop, drain), ms. Default 30000. */
  BMA_REQUEST_TIMEOUT_MS?: string;
  /** The longest long poll (`wait_ms`) of the brain API, ms. Default 60000. */
  BMA_MAX_WAIT_MS?: string;
  /** How long an ended session, its events and its calls stay readable, ms. Default 86400000 (a day). */
  BMA_RETENTION_MS?: string;
  /** How long `session.ended` may take after an accepted `session.stop` beyond its grace, ms. Default 60000. */
  BMA_STOP_SLACK_MS?: string;
  /**
   * `"true"`: executors connect without any token (every connection gets the empty principal
   * and the `default` object). Only for a Worker nobody else can reach, such as a local test.
   */
  BMA_INSECURE_NO_AUTH?: string;
  /** The Worker's other bindings. */
  [binding: string]: unknown;
}

/** Options shared by the Worker ({@linkcode createHarnessWorker}) and the object ({@linkcode HarnessObject}). */
export interface WorkersHarnessOptions {
  /**
   * Decides on a connection before the upgrade (throw: HTTP 401) and verifies refreshed tokens.
   * Default: verify the JWTs of the self-hosted token endpoint (`BMA_JWT_SECRET`).
   */
  authenticate?: (request: ConnectRequest, env: HarnessEnv) => Principal | Promise<Principal>;
  /**
   * The Durable Object (its name) that holds an executor with this principal. Default:
   * `environments/<environment_id>`, `machines/<machine_id>`, else `default`. The brain API
   * reaches the same object under `/v1/harness/<route>/`.
   */
  route?: (principal: Principal) => string;
  /** Where diagnostics go (secret-named fields are redacted). Default: nowhere. */
  logger?: Logger;
  /** The env binding of the Durable Object namespace. Default `BMA_HARNESS`. */
  binding?: string;
  /**
   * Let executors connect without authentication (also `BMA_INSECURE_NO_AUTH = "true"`): only
   * for a Worker nobody else can reach. Default false: without `authenticate` and without
   * `BMA_JWT_SECRET` every connection is refused.
   */
  insecureNoAuth?: boolean;
}

/** Settings read from the environment, with defaults applied. */
export interface HarnessSettings {
  /** `BMA_HEARTBEAT_INTERVAL_MS`. */
  readonly heartbeatIntervalMs: number;
  /** `BMA_MAX_FRAME_BYTES`. */
  readonly maxFrameBytes: number;
  /** `BMA_REQUEST_TIMEOUT_MS`. */
  readonly requestTimeoutMs: number;
  /** `BMA_MAX_WAIT_MS`. */
  readonly maxWaitMs: number;
  /** `BMA_RETENTION_MS`. */
  readonly retentionMs: number;
  /** `BMA_STOP_SLACK_MS`. */
  readonly stopSlackMs: number;
}

/** Reads the numeric settings; a malformed number falls back to the default. */
export function readSettings(env: HarnessEnv): HarnessSettings {
  return {
    heartbeatIntervalMs: positive(env.BMA_HEARTBEAT_INTERVAL_MS, 15_000),
    maxFrameBytes: positive(env.BMA_MAX_FRAME_BYTES, 1024 * 1024),
    requestTimeoutMs: positive(env.BMA_REQUEST_TIMEOUT_MS, 30_000),
    maxWaitMs: positive(env.BMA_MAX_WAIT_MS, 60_000),
    retentionMs: positive(env.BMA_RETENTION_MS, 24 * 60 * 60 * 1000),
    stopSlackMs: positive(env.BMA_STOP_SLACK_MS, 60_000),
  };
}

function positive(value: unknown, fallback: number): number {
  const n = typeof value === "string" ? Number(value) : typeof value === "number" ? value : NaN;
  return Number.isFinite(n) && n > 0 ? n : fallback;
}

/** The default routing rule: one object per environment, one per machine. */
export function defaultRoute(principal: Principal): string {
  if (principal.scope === "environment" && principal.environmentId) {
    return `environments/${principal.environmentId}`;
  }
  if (principal.scope === "machine" && principal.machineId) {
    return `machines/${principal.machineId}`;
  }
  return "default";
}

/** The options with a redacting logger. */
export function resolveLogger(options: WorkersHarnessOptions): Logger {
  return redactingLogger(options.logger ?? silentLogger);
}

// Derived from the environment once per isolate: importing keys and hashing credentials is
// the expensive part of a token check, and the environment of an isolate does not change.
const issuers = new WeakMap<object, TokenIssuer | null>();

/** The token issuer configured by `BMA_JWT_SECRET` / `BMA_CREDENTIALS`, or `undefined`. */
export function tokenIssuer(env: HarnessEnv, logger: Logger): TokenIssuer | undefined {
  const cached = issuers.get(env);
  if (cached !== undefined) return cached ?? undefined;
  let issuer: TokenIssuer | null = null;
  const secret = env.BMA_JWT_SECRET;
  if (typeof secret === "string" && secret !== "") {
    try {
      const options: TokenEndpointOptions = {
        secret,
        credentials: parseCredentials(env.BMA_CREDENTIALS),
        ...(env.BMA_TOKEN_ISSUER ? { issuer: env.BMA_TOKEN_ISSUER } : {}),
        ...(env.BMA_CONNECT_URL ? { connectUrl: env.BMA_CONNECT_URL } : {}),
        ttlSeconds: positive(env.BMA_TOKEN_TTL_SECONDS, 300),
      };
      issuer = new TokenIssuer(options, systemClock);
    } catch (error) {
      logger.error("token endpoint misconfigured", { error: String(error) });
    }
  }
  issuers.set(env, issuer);
  return issuer ?? undefined;
}

function parseCredentials(text: string | undefined): ExecutorCredential[] {
  if (!text) return [];
  const value: unknown = JSON.parse(text);
  if (!Array.isArray(value)) throw new TypeError("BMA_CREDENTIALS must be a JSON array");
  return value.map((item) => {
    const c = item as Record<string, unknown>;
    if (typeof c.machineId === "string" && typeof c.machineToken === "string") {
      return {
        machineId: c.machineId,
        machineToken: c.machineToken,
        ...(typeof c.id === "string" ? { id: c.id } : {}),
      };
    }
    if (typeof c.environmentId === "string" && typeof c.environmentKey === "string") {
      return {
        environmentId: c.environmentId,
        environmentKey: c.environmentKey,
        ...(typeof c.id === "string" ? { id: c.id } : {}),
      };
    }
    throw new TypeError(
      "each credential needs environmentId + environmentKey or machineId + machineToken",
    );
  });
}

/** Whether unauthenticated connections are allowed (an explicit opt-out, in code or env). */
export function insecureNoAuth(options: WorkersHarnessOptions, env: HarnessEnv): boolean {
  return options.insecureNoAuth === true || env.BMA_INSECURE_NO_AUTH === "true";
}

/**
 * The `authenticate` in force: the configured one, else the token issuer's verification, else
 * `undefined` (nothing can connect, unless {@linkcode insecureNoAuth}).
 */
export function resolveAuthenticate(
  options: WorkersHarnessOptions,
  env: HarnessEnv,
  logger: Logger,
): Authenticate | undefined {
  const custom = options.authenticate;
  if (custom) return (request) => custom(request, env);
  const issuer = tokenIssuer(env, logger);
  if (!issuer) return undefined;
  return (request) => {
    if (!request.token) throw new Error("no token");
    return issuer.verify(request.token);
  };
}
