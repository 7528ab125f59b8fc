/**
 * Where the executor's connection token comes from: an environment key or a machine token
 * exchanged at the token endpoint (protocol/contract/http.md), a custom token source, a token
 * given as it is (`token`, for a harness whose `authenticate` checks it), or none at all for a
 * local harness (`harnessUrl`).
 */
import type { Clock } from "../protocol/clock.ts";
import { isLocalSocketUrl, localSocketPath } from "../transport/server.ts";
import { isHeaderSafe } from "../transport/header-safe.ts";
import {
  CredentialRejectedError,
  displayUrl,
  ExecutorConfigError,
  InvalidTokenSourceResultError,
  NotAHarnessError,
  TokenExchangeError,
} from "./errors.ts";
import type {
  ExecutorClientOptions,
  FetchFunction,
  SocketFetch,
  TokenSource,
  TokenSourceResult,
} from "./options.ts";
import type { SecretScrubber } from "./secrets.ts";

/** What a connection attempt needs: where to dial and, unless local, the JWT to present. */
export interface ExecutorToken {
  /** The executor JWT; absent for a local harness. */
  readonly token?: string;
  /** When the token expires, in ms since the epoch; absent when it does not expire. */
  readonly expiresAt?: number;
  /** The WebSocket channel URL: `ws://`, `wss://` or `unix:///path.sock`. */
  readonly url: string;
  /** The executor id the token names, when the endpoint says (machine scope). */
  readonly executorId?: string;
}

/** The credential options of the client: those of {@linkcode ExecutorClientOptions}. */
export type CredentialOptions = Pick<
  ExecutorClientOptions,
  | "baseUrl"
  | "environmentKey"
  | "environmentId"
  | "machineToken"
  | "machineId"
  | "tokenSource"
  | "token"
  | "harnessUrl"
  | "socketFetch"
>;

/** How the client is identified and how it obtains tokens. */
export interface Credentials {
  /** Which kind of credential this is. */
  readonly scope: "environment" | "machine" | "custom" | "static" | "local";
  /** The environment id sent in `executor.register` (`""` for a machine-scoped executor). */
  readonly environmentId: string;
  /** The machine id (machine scope). */
  readonly machineId: string | undefined;
  /**
   * The deployment origin (token exchange, artifacts), when configured; for a local harness
   * without one, the harness's own HTTP side (see {@linkcode localHarnessOrigin}).
   */
  readonly baseUrl: string | undefined;
  /** How to reach `baseUrl` when the global fetch cannot (a harness on a local socket). */
  readonly fetch?: FetchFunction;
  /** Whether tokens expire and are refreshed (false for a local harness without a token). */
  readonly refreshable: boolean;
  /** Obtains a fresh token with the original credential. */
  fetchToken(signal: AbortSignal): Promise<ExecutorToken>;
}

/** The environment id of a local executor configured with neither environment nor machine. */
export const LOCAL_ENVIRONMENT_ID = "local";

/** A configured base URL without trailing slashes and without a trailing `/api/v1`. */
export function normalizeBaseUrl(baseUrl: string): string {
  let url = baseUrl.trim().replace(/\/+$/, "");
  if (url.endsWith("/api/v1")) url = url.slice(0, -"/api/v1".length).replace(/\/+$/, "");
  return url;
}

/** Builds the credentials from the client's options; throws {@linkcode ExecutorConfigError}. */
export function createCredentials(
  options: CredentialOptions,
  deps: { fetch: FetchFunction | undefined; clock: Clock; scrubber: SecretScrubber },
): Credentials {
  const baseUrl = options.baseUrl ? normalizeBaseUrl(options.baseUrl) : undefined;
  const harnessUrl = options.harnessUrl;
  if (options.token !== undefined) return staticCredentials(options.token, options, baseUrl);
  if (options.tokenSource) {
    return new CustomCredentials(options.tokenSource, options, baseUrl, deps);
  }
  if (options.machineToken !== undefined) {
    if (!options.machineId) throw new ExecutorConfigError("machineToken needs machineId");
    checkSecret("machineToken", options.machineToken);
    return new ExchangedCredentials("machine", options.machineToken, options, baseUrl, deps);
  }
  if (options.environmentKey !== undefined) {
    if (!options.environmentId) {
      throw new ExecutorConfigError("environmentKey needs environmentId");
    }
    checkSecret("environmentKey", options.environmentKey);
    return new ExchangedCredentials("environment", options.environmentKey, options, baseUrl, deps);
  }
  if (harnessUrl) {
    const origin = baseUrl === undefined
      ? localHarnessOrigin(harnessUrl, options.socketFetch)
      : { baseUrl };
    return {
      scope: "local",
      // Without an environment or a machine, a local executor registers in environment "local":
      // an empty environment_id would make it machine-scoped, which needs the process capability.
      environmentId: options.environmentId ?? (options.machineId ? "" : LOCAL_ENVIRONMENT_ID),
      machineId: options.machineId,
      ...origin,
      refreshable: false,
      fetchToken: () => Promise.resolve({ url: harnessUrl }),
    };
  }
  throw new ExecutorConfigError(
    "no credential: give environmentKey + environmentId, machineToken + machineId, tokenSource, or harnessUrl",
  );
}

/**
 * A token given as it is (`token`): presented to `harnessUrl` on every connection as
 * `Authorization: Bearer …`, and to its HTTP side for uploads. It does not expire as far as the
 * client knows, so nothing refreshes it; it is held in memory only, and the scrubber keeps it out
 * of every log line.
 */
function staticCredentials(
  token: unknown,
  options: CredentialOptions,
  baseUrl: string | undefined,
): Credentials {
  if (typeof token !== "string" || !token) {
    throw new ExecutorConfigError("token must be a non-empty string");
  }
  if (!isHeaderSafe(token)) {
    throw new ExecutorConfigError("token must not contain spaces or control characters");
  }
  if (
    options.tokenSource !== undefined || options.machineToken !== undefined ||
    options.environmentKey !== undefined
  ) {
    throw new ExecutorConfigError(
      "token is a credential of its own: give it without tokenSource, machineToken or environmentKey",
    );
  }
  const harnessUrl = options.harnessUrl;
  if (!harnessUrl) {
    throw new ExecutorConfigError(
      "token needs harnessUrl: the harness whose authenticate checks it",
    );
  }
  return {
    scope: "static",
    environmentId: options.environmentId ?? (options.machineId ? "" : LOCAL_ENVIRONMENT_ID),
    machineId: options.machineId,
    ...(baseUrl === undefined ? localHarnessOrigin(harnessUrl, options.socketFetch) : { baseUrl }),
    refreshable: false,
    fetchToken: () => Promise.resolve({ token, url: harnessUrl }),
  };
}

/**
 * Refuses a secret no `Authorization` header can carry (a control character, a space, a
 * character beyond ASCII): every exchange with it would fail before reaching the endpoint, and
 * was retried for good as an unreachable endpoint.
 */
function checkSecret(name: string, secret: unknown): void {
  if (typeof secret !== "string" || !secret) {
    throw new ExecutorConfigError(`${name} must be a non-empty string`);
  }
  if (!isHeaderSafe(secret)) {
    throw new ExecutorConfigError(`${name} must not contain spaces or control characters`);
  }
}

/**
 * Where a harness dialed directly serves its HTTP side (artifact uploads): the same origin over
 * HTTP (`ws://host:port/...` → `http://host:port`, `wss://` → `https://`), or, for
 * `unix:///path.sock` (and named pipes), the same socket through `socketFetch`. Without
 * `socketFetch` a socket harness has no reachable origin: `baseUrl` is undefined.
 */
export function localHarnessOrigin(
  harnessUrl: string,
  socketFetch: SocketFetch | undefined,
): { baseUrl: string | undefined; fetch?: FetchFunction } {
  if (isLocalSocketUrl(harnessUrl)) {
    if (!socketFetch) return { baseUrl: undefined };
    const path = localSocketPath(harnessUrl);
    return {
      baseUrl: "http://localhost",
      fetch: (input, init) => socketFetch(path, new Request(input, init)),
    };
  }
  let url: URL;
  try {
    url = new URL(harnessUrl);
  } catch {
    return { baseUrl: undefined };
  }
  if (url.protocol === "ws:") return { baseUrl: `http://${url.host}` };
  if (url.protocol === "wss:") return { baseUrl: `https://${url.host}` };
  return { baseUrl: undefined };
}

function parseExpiry(value: Date | number | string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (value instanceof Date) return value.getTime();
  if (typeof value === "number") return value;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * What the two credentials that fetch tokens hold alike: who the executor is, the deployment
 * origin, the channel URL to dial instead of the one a token names (`harnessUrl`), and the
 * scrubber every fetched token goes into before anything can log it.
 */
abstract class FetchingCredentials implements Credentials {
  abstract readonly scope: "environment" | "machine" | "custom";
  readonly environmentId: string;
  readonly machineId: string | undefined;
  readonly baseUrl: string | undefined;
  readonly refreshable = true;
  protected readonly harnessUrl: string | undefined;
  protected readonly scrubber: SecretScrubber;

  constructor(
    environmentId: string,
    options: CredentialOptions,
    baseUrl: string | undefined,
    scrubber: SecretScrubber,
  ) {
    this.environmentId = environmentId;
    this.machineId = options.machineId;
    this.baseUrl = baseUrl;
    this.harnessUrl = options.harnessUrl;
    this.scrubber = scrubber;
  }

  abstract fetchToken(signal: AbortSignal): Promise<ExecutorToken>;
}

class CustomCredentials extends FetchingCredentials {
  readonly scope = "custom" as const;
  readonly #source: TokenSource;

  constructor(
    source: TokenSource,
    options: CredentialOptions,
    baseUrl: string | undefined,
    deps: { scrubber: SecretScrubber },
  ) {
    super(options.environmentId ?? "", options, baseUrl, deps.scrubber);
    this.#source = source;
  }

  async fetchToken(signal: AbortSignal): Promise<ExecutorToken> {
    let result: TokenSourceResult;
    try {
      result = await this.#source({ signal });
    } catch (error) {
      if (error instanceof CredentialRejectedError || error instanceof TokenExchangeError) {
        throw error;
      }
      throw new TokenExchangeError("the token source failed", undefined, { cause: error });
    }
    // A wrong shape is the program's mistake, which asking again does not mend: refused at once.
    const problem = tokenSourceProblem(result, this.harnessUrl === undefined);
    if (problem) throw new InvalidTokenSourceResultError(problem);
    this.scrubber.add(result.token);
    return {
      token: result.token,
      expiresAt: parseExpiry(result.expiresAt),
      url: this.harnessUrl ?? result.url,
    };
  }
}

/**
 * What is wrong with what a token source returned, in words that never hold its values (a
 * token must not reach an error message); undefined when it is a `TokenSourceResult`. `url`
 * may be left out when `harnessUrl` names where to dial; `expiresAt` may be left out (the token
 * is then never refreshed: the harness ends the connection with 4001 when it expires, and the
 * client reconnects with a fresh one).
 */
function tokenSourceProblem(result: unknown, needsUrl: boolean): string | undefined {
  if (result === undefined || result === null) return String(result);
  if (typeof result !== "object") return `a ${typeof result} instead of an object`;
  if (Array.isArray(result)) return "an array instead of an object";
  const { token, url, expiresAt } = result as Record<string, unknown>;
  if (token === undefined) return "no token";
  if (typeof token !== "string") return `a token of type ${typeName(token)}`;
  if (!token) return "an empty token";
  if (!isHeaderSafe(token)) return "a token with spaces or control characters";
  if (needsUrl) {
    if (url === undefined) return "no url (and the client has no harnessUrl)";
    if (typeof url !== "string") return `a url of type ${typeName(url)}`;
    if (!url) return "an empty url";
  }
  if (expiresAt !== undefined) {
    const valid = expiresAt instanceof Date || typeof expiresAt === "number" ||
      typeof expiresAt === "string";
    if (!valid) return `an expiresAt of type ${typeName(expiresAt)}`;
    const ms = parseExpiry(expiresAt);
    if (ms === undefined || !Number.isFinite(ms)) return "an expiresAt that is no time";
  }
  return undefined;
}

/** A value's kind, for a message that must not show the value. */
function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** The token endpoint's 200 body (protocol/contract/http.md). */
interface TokenResponseBody {
  token?: unknown;
  expires_at?: unknown;
  expires_in?: unknown;
  url?: unknown;
  executor_id?: unknown;
}

class ExchangedCredentials extends FetchingCredentials {
  readonly scope: "environment" | "machine";
  readonly #secret: string;
  readonly #fetch: FetchFunction;
  readonly #clock: Clock;
  /** Set once the environment path answered 404: the deployment only has the legacy alias. */
  #legacyOnly = false;

  constructor(
    scope: "environment" | "machine",
    secret: string,
    options: CredentialOptions,
    baseUrl: string | undefined,
    deps: { fetch: FetchFunction | undefined; clock: Clock; scrubber: SecretScrubber },
  ) {
    if (!baseUrl) throw new ExecutorConfigError(`${scope} credentials need baseUrl`);
    const fetchFn = deps.fetch ?? (globalThis.fetch?.bind(globalThis) as FetchFunction | undefined);
    if (!fetchFn) throw new ExecutorConfigError("no fetch function: pass the fetch option");
    super(scope === "environment" ? options.environmentId! : "", options, baseUrl, deps.scrubber);
    this.scope = scope;
    this.#secret = secret;
    this.#fetch = fetchFn;
    this.#clock = deps.clock;
  }

  async fetchToken(signal: AbortSignal): Promise<ExecutorToken> {
    const base = this.baseUrl!;
    if (this.scope === "machine") {
      return await this.#exchange(
        `${base}/v1/machines/${encodeURIComponent(this.machineId!)}/token`,
        {},
        signal,
      );
    }
    const legacy = () =>
      this.#exchange(`${base}/v1/executors/token`, { environment_id: this.environmentId }, signal);
    if (this.#legacyOnly) return await legacy();
    try {
      return await this.#exchange(
        `${base}/v1/environments/${encodeURIComponent(this.environmentId)}/token`,
        {},
        signal,
      );
    } catch (error) {
      // An older deployment serves only the legacy alias.
      if (error instanceof NotAHarnessError && error.status === 404) {
        this.#legacyOnly = true;
        return await legacy();
      }
      throw error;
    }
  }

  async #exchange(endpoint: string, body: unknown, signal: AbortSignal): Promise<ExecutorToken> {
    let response: Response;
    try {
      response = await this.#fetch(endpoint, {
        method: "POST",
        headers: {
          authorization: `Bearer ${this.#secret}`,
          "content-type": "application/json",
          accept: "application/json",
          // Not kept alive for a later exchange: behind a TCP load balancer a kept-alive
          // connection stays tied to the harness it first reached, and after a failover that
          // one may be frozen (Deno's and Bun's fetch keep idle connections for long).
          connection: "close",
        },
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      if (signal.aborted) throw signal.reason;
      // The errno (ECONNREFUSED, ...) travels on: fetch puts it on the error or its cause.
      const code = (error as { code?: unknown })?.code ??
        ((error as { cause?: { code?: unknown } })?.cause)?.code;
      // Deno's fetch says what failed only in its cause's message.
      const inner = (error as { cause?: { message?: unknown } })?.cause?.message;
      const message = String((error as Error)?.message ?? error) +
        (typeof inner === "string" && inner ? `: ${inner}` : "");
      const cause = new Error(this.scrubber.scrub(message));
      throw new TokenExchangeError("the token endpoint is unreachable", undefined, {
        cause: typeof code === "string" ? Object.assign(cause, { code }) : cause,
      });
    }
    if (response.status === 401 || response.status === 403) {
      const code = await errorCode(response);
      throw new CredentialRejectedError(response.status, code);
    }
    if (response.status === 404) {
      await response.body?.cancel().catch(() => {});
      throw notTheTokenEndpoint(endpoint, 404, "the token endpoint answered HTTP 404");
    }
    if (response.status !== 200 && response.status !== 201) {
      await response.body?.cancel().catch(() => {});
      // 4xx other than 408/429 (and 404, above) cannot be fixed by retrying.
      const retryable = response.status >= 500 || [408, 429].includes(response.status);
      if (!retryable) throw new CredentialRejectedError(response.status);
      throw new TokenExchangeError(
        `the token endpoint answered HTTP ${response.status}`,
        response.status,
      );
    }
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      // The answer broke off (a dropped connection): that may pass, so it is retried.
      if (signal.aborted) throw signal.reason;
      throw new TokenExchangeError("the token endpoint's answer broke off", undefined, {
        cause: error,
      });
    }
    let parsed: TokenResponseBody;
    try {
      parsed = JSON.parse(text) as TokenResponseBody;
    } catch {
      throw notTheTokenEndpoint(endpoint, response.status, "the token endpoint sent no JSON");
    }
    if (typeof parsed?.token !== "string" || parsed.token.length === 0) {
      throw notTheTokenEndpoint(endpoint, response.status, "the token endpoint sent no token");
    }
    this.scrubber.add(parsed.token);
    let expiresAt = typeof parsed.expires_at === "string"
      ? parseExpiry(parsed.expires_at)
      : undefined;
    if (expiresAt === undefined && typeof parsed.expires_in === "number") {
      expiresAt = this.#clock.now() + parsed.expires_in * 1000;
    }
    const url = this.harnessUrl ??
      (typeof parsed.url === "string" && parsed.url
        ? parsed.url
        : defaultChannelUrl(this.baseUrl!));
    return {
      token: parsed.token,
      expiresAt,
      url,
      executorId: typeof parsed.executor_id === "string" ? parsed.executor_id : undefined,
    };
  }
}

/**
 * The rule for an answer no token endpoint gives, which retrying cannot change: HTTP 404
 * (nothing is served there), or a 200 that is not the token endpoint's JSON (a web page). The
 * base URL is no harness's (a mistyped `BMA_BASE_URL`), and the client stops
 * (`not_a_harness`), as it does for such an answer to the upgrade. The environment path's 404
 * is first tried again on the legacy alias (`fetchToken`).
 */
function notTheTokenEndpoint(endpoint: string, status: number, problem: string): NotAHarnessError {
  return new NotAHarnessError(displayUrl(endpoint), status, {
    cause: new TokenExchangeError(problem, status),
  });
}

async function errorCode(response: Response): Promise<string | undefined> {
  try {
    const body = await response.json() as { error?: unknown };
    return typeof body?.error === "string" ? body.error.slice(0, 64) : undefined;
  } catch {
    return undefined;
  }
}

/** The channel URL when the token endpoint names none: the deployment's connect path. */
function defaultChannelUrl(baseUrl: string): string {
  return `${baseUrl.replace(/^http/, "ws")}/v1/executors/connect`;
}

/**
 * The latest token the client holds, for what goes to the harness over HTTP beside the
 * connection (artifact uploads): the connection's, renewed by its refresher, or a fresh one
 * when it is about to expire.
 */
export class TokenCache {
  /** The latest token; set by each registration and each refresh. */
  token: ExecutorToken | undefined;
  readonly #credentials: Credentials;
  readonly #clock: Clock;

  /** A cache that fetches with `credentials` when it holds no usable token. */
  constructor(credentials: Credentials, clock: Clock) {
    this.#credentials = credentials;
    this.#clock = clock;
  }

  /** A token valid for at least 10 s more; undefined for a local harness, which takes none. */
  async current(signal?: AbortSignal): Promise<string | undefined> {
    const token = this.token;
    if (
      token?.token &&
      (token.expiresAt === undefined || token.expiresAt - this.#clock.now() > 10_000)
    ) {
      return token.token;
    }
    if (this.#credentials.scope === "local") return undefined;
    const fresh = await this.#credentials.fetchToken(signal ?? new AbortController().signal);
    this.token = fresh;
    return fresh.token;
  }
}
