/**
 * How the `BMA_*` variables describe a harness's options: the token endpoint and its JWT check,
 * heartbeat, frame and request limits, `insecureNoAuth`, the brain API and the metrics endpoint.
 * One reading for both hosts that take them from an environment — the edge harness (a Worker's
 * vars and secrets, `harness/workers/config.ts`) and `bma-harness serve` — so the two read one
 * description.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */
import type { BrainApiOptions } from "./brain-api/brain-api.ts";
import type { HarnessOptions } from "../harness/harness-options.ts";
import { type Authorize, bearerAuthorize, MIN_TOKEN_LENGTH } from "./shared/bearer.ts";
import { credentialProblem, type ExecutorCredential } from "./token-endpoint/token-issuer.ts";
import type { DurableObjectNamespaceLike } from "../harness/workers/types.ts";
import { jsonSyntaxError } from "../protocol/logger.ts";

/**
 * An environment that describes a harness: the `BMA_*` variables (numbers arrive as strings),
 * and on the edge the Worker's bindings. Secrets (`BMA_JWT_SECRET`, `BMA_CREDENTIALS`,
 * `BMA_BRAIN_TOKEN`, `BMA_METRICS_TOKEN`) never belong in a file under version control: on the
 * edge they go in `wrangler secret put`, never in `wrangler.toml`.
 */
export interface HarnessEnv {
  /**
   * The edge's Durable Object namespace of `HarnessObject` (the binding name is configurable).
   */
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
  /**
   * Bearer token of the metrics endpoint (OpenMetrics text; on the edge, each object's
   * `GET /v1/harness/<object name>/metrics`); without it there is no such route (404), and a too
   * short one (under 16 characters) admits nobody.
   */
  BMA_METRICS_TOKEN?: string;
  /** Heartbeat interval handed to executors, ms (the lease is twice that). Default 15000. */
  BMA_HEARTBEAT_INTERVAL_MS?: string;
  /** Lifetime of issued executor tokens, s. Default 300. */
  BMA_TOKEN_TTL_SECONDS?: string;
  /** `iss` of issued tokens. Default `bma-harness`. */
  BMA_TOKEN_ISSUER?: string;
  /** The `url` the token endpoint returns. Default: this host's `/v1/executors/connect`. */
  BMA_CONNECT_URL?: string;
  /** Frames over this many bytes close the connection with 1009. Default 1 MiB. */
  BMA_MAX_FRAME_BYTES?: string;
  /** Timeout of the requests the harness sends executors, ms. Default 60000. */
  BMA_REQUEST_TIMEOUT_MS?: string;
  /**
   * `"true"`: executors connect without any token (every connection gets the empty principal;
   * on the edge, the `default` object). Only for a harness nobody else can reach, such as a local
   * test.
   */
  BMA_INSECURE_NO_AUTH?: string;
  /** The Worker's other bindings (on the edge), or the process's other variables. */
  [binding: string]: unknown;
}

/** The options the variables describe: some of a harness's, and its brain API's. */
export interface HarnessVariableOptions extends
  Pick<
    HarnessOptions,
    | "maxFrameBytes"
    | "heartbeatIntervalMs"
    | "requestTimeoutMs"
    | "insecureNoAuth"
    | "metricsEndpoint"
    | "tokens"
  > {
  /** The brain API's options: its `authorize` (behind `BMA_BRAIN_TOKEN`). */
  brainApi: Omit<BrainApiOptions, "basePath">;
}

/**
 * The options the environment describes: the token endpoint and its JWT check
 * (`BMA_JWT_SECRET`, `BMA_CREDENTIALS`, ...), heartbeat, frame and request limits,
 * `insecureNoAuth`, the brain API behind `BMA_BRAIN_TOKEN` and the metrics behind
 * `BMA_METRICS_TOKEN`. Throws {@linkcode HarnessVariableError} on a malformed number, connect URL
 * or credentials (an unset or empty variable takes its default).
 */
export function harnessOptionsFromVariables(env: HarnessEnv): HarnessVariableOptions {
  const secret = env.BMA_JWT_SECRET;
  // Unset or empty: the default. Anything else must be what it says, or the harness would run
  // on a default nobody chose.
  const number = (name: string) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return undefined;
    const value = typeof raw === "number" ? String(raw) : raw;
    const n = typeof value === "string" ? positiveInteger(value) : undefined;
    if (n === undefined) {
      const shown = typeof value === "string" ? JSON.stringify(value.slice(0, 40)) : typeof value;
      throw new HarnessVariableError(name, `takes a positive integer, not ${shown}`);
    }
    return n;
  };
  const heartbeatIntervalMs = number("BMA_HEARTBEAT_INTERVAL_MS");
  const requestTimeoutMs = number("BMA_REQUEST_TIMEOUT_MS");
  const ttlSeconds = number("BMA_TOKEN_TTL_SECONDS");
  const maxFrameBytes = number("BMA_MAX_FRAME_BYTES");
  if (env.BMA_CONNECT_URL && !isConnectUrl(env.BMA_CONNECT_URL)) {
    throw new HarnessVariableError("BMA_CONNECT_URL", "is not a ws:// or wss:// URL");
  }
  // Read whether or not a secret makes them used: malformed, they are refused either way.
  const credentials = parseCredentials(env.BMA_CREDENTIALS);
  return {
    maxFrameBytes: maxFrameBytes ?? 1024 * 1024,
    ...(heartbeatIntervalMs ? { heartbeatIntervalMs } : {}),
    ...(requestTimeoutMs ? { requestTimeoutMs } : {}),
    ...(env.BMA_INSECURE_NO_AUTH === "true" ? { insecureNoAuth: true } : {}),
    brainApi: { authorize: tokenOrNobody(env.BMA_BRAIN_TOKEN) },
    ...(env.BMA_METRICS_TOKEN !== undefined
      ? { metricsEndpoint: { authorize: tokenOrNobody(env.BMA_METRICS_TOKEN) } }
      : {}),
    ...(typeof secret === "string" && secret !== ""
      ? {
        tokens: {
          secret,
          credentials,
          ...(env.BMA_TOKEN_ISSUER ? { issuer: env.BMA_TOKEN_ISSUER } : {}),
          ...(env.BMA_CONNECT_URL ? { connectUrl: env.BMA_CONNECT_URL } : {}),
          ...(ttlSeconds ? { ttlSeconds } : {}),
        },
      }
      : {}),
  };
}

/**
 * A `BMA_*` variable a harness cannot run with: a number that is no positive integer, a connect
 * URL that is no `ws://` or `wss://` URL, malformed credentials. The message names the variable
 * and never quotes a secret.
 */
export class HarnessVariableError extends TypeError {
  /** The variable: `BMA_CREDENTIALS`. */
  readonly variable: string;
  /** What is wrong with it, said after its name: `is not valid JSON (at character 1)`. */
  readonly problem: string;
  /** The variable, and what is wrong with it. */
  constructor(variable: string, problem: string) {
    super(`${variable} ${problem}`);
    this.name = "HarnessVariableError";
    this.variable = variable;
    this.problem = problem;
  }
}

/**
 * `value` as a positive integer when it is one written in digits (`15000`), else undefined:
 * `Number` alone would take `1e3`, `0x10`, `1.5` and a number past 2^53 rounded.
 */
export function positiveInteger(value: string): number | undefined {
  const n = Number(value);
  return /^\d+$/.test(value) && Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Whether `value` is a `ws://` or `wss://` URL, what the token endpoint may hand executors. */
export function isConnectUrl(value: string): boolean {
  if (!/^wss?:\/\//i.test(value)) return false;
  try {
    return new URL(value).hostname !== "";
  } catch {
    return false;
  }
}

function parseCredentials(text: string | undefined): ExecutorCredential[] {
  if (!text) return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    // The parser's message quotes the text: the credentials.
    throw new HarnessVariableError("BMA_CREDENTIALS", `is ${jsonSyntaxError(error)}`);
  }
  if (!Array.isArray(value)) {
    throw new HarnessVariableError("BMA_CREDENTIALS", "is not a JSON array");
  }
  return value.map((item, i) => {
    const c = item as Record<string, unknown>;
    const id = typeof c.id === "string" ? { id: c.id } : {};
    let credential: ExecutorCredential;
    if (typeof c.machineId === "string" && typeof c.machineToken === "string") {
      credential = { machineId: c.machineId, machineToken: c.machineToken, ...id };
    } else if (typeof c.environmentId === "string" && typeof c.environmentKey === "string") {
      credential = { environmentId: c.environmentId, environmentKey: c.environmentKey, ...id };
    } else {
      throw new HarnessVariableError(
        "BMA_CREDENTIALS",
        "holds a credential without environmentId + environmentKey or machineId + machineToken",
      );
    }
    const problem = credentialProblem(credential);
    if (problem !== undefined) {
      throw new HarnessVariableError("BMA_CREDENTIALS", `holds credential ${i + 1}: ${problem}`);
    }
    return credential;
  });
}

/**
 * The `authorize` of the brain API and the metrics endpoint: the bearer `token`; none (or a too
 * short one) admits nobody, so a Worker missing its secret serves no one rather than failing.
 */
function tokenOrNobody(token: string | undefined): Authorize {
  if (typeof token !== "string" || token.length < MIN_TOKEN_LENGTH) return () => false;
  return bearerAuthorize(token);
}
