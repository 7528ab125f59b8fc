/**
 * Local failures of the executor client: things that went wrong on this side and never crossed
 * the JSON-RPC wire. Wire errors are the contract's generated classes (`ProtocolError`
 * subclasses); `start()` rejects with those too when `executor.register` is refused.
 *
 * No message here ever contains a credential or a token.
 */
import { ConnectionClosedError, LocalError, ProtocolError } from "../protocol/errors.ts";

/**
 * A connection attempt's token exchange or WebSocket dial took longer than its deadline (see
 * `ExecutorClientOptions.connectTimeoutMs`): the harness behind the address accepted the
 * connection but does not answer (a frozen process, a kept-alive connection to a harness that
 * is gone). The client abandons the attempt and tries again.
 */
export class ConnectTimeoutError extends LocalError {
  /** What the attempt was doing. */
  readonly stage: "token" | "dial";
  /** The deadline, in ms. */
  readonly timeoutMs: number;
  /** The stage that ran out of time, and its deadline. */
  constructor(stage: "token" | "dial", timeoutMs: number) {
    super(
      `the ${stage === "token" ? "token exchange" : "WebSocket dial"} took over ${timeoutMs} ms`,
    );
    this.name = "ConnectTimeoutError";
    this.stage = stage;
    this.timeoutMs = timeoutMs;
  }
}

/** The options given to the client cannot work (a missing credential, dialer, or id). */
export class ExecutorConfigError extends LocalError {
  /** `message` says which option is wrong. */
  constructor(message: string) {
    super(message);
    this.name = "ExecutorConfigError";
  }
}

/**
 * The token endpoint refused the credential (HTTP 401, or another 4xx that retrying cannot fix).
 * The client stops for good, as it does on close code 4002.
 */
export class CredentialRejectedError extends LocalError {
  /** The HTTP status the token endpoint answered. */
  readonly status: number;
  /** The endpoint's `error` member, when it sent one (e.g. `invalid_credential`). */
  readonly errorCode: string | undefined;
  /** The endpoint's answer: its HTTP status and `error` member. */
  constructor(status: number, errorCode?: string) {
    super(
      `the token endpoint refused the credential (HTTP ${status}${
        errorCode ? ` ${errorCode}` : ""
      })`,
    );
    this.name = "CredentialRejectedError";
    this.status = status;
    this.errorCode = errorCode;
  }
}

/** The token exchange failed in a way worth retrying: a 5xx, a network failure, a bad body. */
export class TokenExchangeError extends LocalError {
  /** The HTTP status, when the endpoint answered at all. */
  readonly status: number | undefined;
  /** What failed, the HTTP status when there was one, and the underlying failure as `cause`. */
  constructor(message: string, status?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TokenExchangeError";
    this.status = status;
  }
}

/** The harness refused the WebSocket upgrade for the token (HTTP 401 or 403): the client stops. */
export class ConnectionRefusedError extends LocalError {
  /** The HTTP status of the refused upgrade. */
  readonly status: number;
  /** The status of the refused upgrade. */
  constructor(status: number, options?: { cause?: unknown }) {
    super(`the harness refused the connection (HTTP ${status})`, options);
    this.name = "ConnectionRefusedError";
    this.status = status;
  }
}

/**
 * The URL the client dials answered as no harness does, with an answer that retrying cannot
 * change: HTTP 404 (or 405, 410: nothing is served there), a 200 or another answer without an
 * upgrade, a redirect, or another 4xx than 401, 403, 408 and 429 (which are refused,
 * {@linkcode ConnectionRefusedError}, or retried). Or, with `baseUrl`, the token endpoint
 * answered as none does: HTTP 404 (on the legacy alias too), or a 200 that is not its JSON (a web
 * page); `url` is then the token endpoint's. The client stops (`closed` says `not_a_harness`);
 * check the URL. The refused dial, or the failed token exchange, is its `cause`.
 */
export class NotAHarnessError extends LocalError {
  /** The HTTP status of the answer. */
  readonly status: number;
  /** The URL dialed, as it may be shown (no user info, query or fragment). */
  readonly url: string;
  /** The URL as it may be shown, the status, and the refused dial as `cause`. */
  constructor(url: string, status: number, options?: { cause?: unknown }) {
    super(`${url} answered HTTP ${status}: it is not a harness`, options);
    this.name = "NotAHarnessError";
    this.url = url;
    this.status = status;
  }
}

/**
 * A `tokenSource` returned what is not a `TokenSourceResult` (a bare string, no
 * `token`, no `url`, an `expiresAt` that is no time): a mistake in the program, which no retry
 * mends, so the client stops at once (`closed` says `config`). The message names what is wrong,
 * never the value returned.
 */
export class InvalidTokenSourceResultError extends ExecutorConfigError {
  /** What is wrong with the result. */
  constructor(problem: string) {
    super(
      `the token source returned ${problem}: it must resolve to { token: string, expiresAt, url: string }`,
    );
    this.name = "InvalidTokenSourceResultError";
  }
}

/** The client has stopped (or is stopping): the operation cannot complete. */
export class ClientStoppedError extends LocalError {
  /** Defaults to a message saying the client has stopped. */
  constructor(message = "the executor client has stopped") {
    super(message);
    this.name = "ClientStoppedError";
  }
}

/** A lossy send (a notification) was attempted while no connection is registered. */
export class NotConnectedError extends LocalError {
  /** Names the method that was not sent. */
  constructor(method: string) {
    super(`${method} not sent: the executor is not connected`);
    this.name = "NotConnectedError";
  }
}

/** An artifact upload failed. */
export class ArtifactUploadError extends LocalError {
  /** The HTTP status, when the endpoint answered. */
  readonly status: number | undefined;
  /** What failed, the HTTP status when there was one, and the underlying failure as `cause`. */
  constructor(message: string, status?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ArtifactUploadError";
    this.status = status;
  }
}

/** A session id the client does not hold (never assigned, or already ended). */
export class UnknownSessionError extends LocalError {
  /** The session id. */
  readonly sessionId: string;
  /** Names the session id. */
  constructor(sessionId: string) {
    super(`unknown session ${JSON.stringify(sessionId)}`);
    this.name = "UnknownSessionError";
    this.sessionId = sessionId;
  }
}

/**
 * What lies under an error, for a log line: along its `cause` chain, the first errno-style
 * `code` (`ECONNREFUSED`, `ENOENT`, `ETIMEDOUT`, ...), JSON-RPC error code, close code or HTTP
 * status; else the innermost cause's message.
 */
export function errorCause(error: unknown): string | undefined {
  let innermost: unknown = undefined;
  let at: unknown = error;
  for (let depth = 0; depth < 8 && at !== undefined && at !== null; depth++) {
    const { code, status } = at as { code?: unknown; status?: unknown };
    if (typeof code === "string" && code) return code;
    if (at instanceof ProtocolError) return `JSON-RPC error ${at.code}`;
    if (at instanceof ConnectionClosedError) return `close code ${at.code}`;
    if (typeof status === "number") return `HTTP ${status}`;
    if (at !== error) innermost = at;
    at = (at as { cause?: unknown }).cause;
  }
  if (innermost === undefined) return undefined;
  return innermost instanceof Error ? innermost.message : String(innermost);
}

/**
 * A URL as it may be shown: without user info, query or fragment, where a token could travel
 * (`?token=…`). Something that is not a URL (a Windows pipe name) is shown as it is.
 */
export function displayUrl(url: string): string {
  if (!url) return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url;
  }
  if (parsed.protocol === "unix:") return `unix://${parsed.pathname}`;
  return `${parsed.protocol}//${parsed.host}${parsed.pathname === "/" ? "" : parsed.pathname}`;
}
