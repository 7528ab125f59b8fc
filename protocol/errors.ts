/**
 * Errors are values with codes.
 *
 * - {@linkcode ProtocolError} and its generated subclasses (one per error code of the contract,
 *   see `generated/errors.ts`) are *wire* errors: a JSON-RPC error object, received from the
 *   peer or thrown by a handler to be sent to it.
 * - {@linkcode LocalError} subclasses are failures on this side that never crossed the wire:
 *   the connection closed, a request timed out or was aborted, a capability was not advertised.
 */

/** A JSON-RPC 2.0 error object as it travels on the wire. */
export interface JsonRpcErrorObject {
  /** The error code. */
  code: number;
  /** A short description. */
  message: string;
  /** Further information, as the contract says per code. */
  data?: unknown;
}

/** A JSON-RPC error: received from the peer, or thrown by a handler to answer with. */
export class ProtocolError extends Error {
  /** The JSON-RPC error code. */
  readonly code: number;
  /** The error's `data` member, if any. */
  readonly data: unknown;

  /** An error with a JSON-RPC code, message and optional `data`. */
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = "ProtocolError";
    this.code = code;
    this.data = data;
  }

  /** `data.reason` when the error carries one (the contract's convention for a sub-code). */
  get reason(): string | undefined {
    const data = this.data as { reason?: unknown } | undefined;
    return typeof data?.reason === "string" ? data.reason : undefined;
  }

  /** The error as a JSON-RPC error object. */
  toJSON(): JsonRpcErrorObject {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
}

/** A failure on this side of the connection; it never crossed the wire. */
export class LocalError extends Error {
  /** `message` says what failed; `cause` the failure behind it. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LocalError";
  }
}

/** The connection ended; every request still pending on it is rejected with this. */
export class ConnectionClosedError extends LocalError {
  /** The WebSocket close code. */
  readonly code: number;
  /** The close reason. */
  readonly reason: string;
  /** The close code and reason the connection ended with. */
  constructor(code: number, reason: string) {
    super(`connection closed (${code}${reason ? `: ${reason}` : ""})`);
    this.name = "ConnectionClosedError";
    this.code = code;
    this.reason = reason;
  }
}

/** A request got no response within its timeout. */
export class RequestTimeoutError extends LocalError {
  /** The method of the request. */
  readonly method: string;
  /** The timeout it had. */
  readonly timeoutMs: number;
  /** The method and the timeout that passed. */
  constructor(method: string, timeoutMs: number) {
    super(`${method} timed out after ${timeoutMs} ms`);
    this.name = "RequestTimeoutError";
    this.method = method;
    this.timeoutMs = timeoutMs;
  }
}

/** A request was aborted through its `signal`; its `cause` is the signal's reason. */
export class RequestAbortedError extends LocalError {
  /** The method of the request. */
  readonly method: string;
  /** The method, and the signal's reason as `cause`. */
  constructor(method: string, cause?: unknown) {
    super(`${method} aborted`, { cause });
    this.name = "RequestAbortedError";
    this.method = method;
  }
}

/** The method is gated by a capability the executor did not advertise; nothing was sent. */
export class CapabilityNotAdvertisedError extends LocalError {
  /** The method. */
  readonly method: string;
  /** The capability that gates it. */
  readonly capability: string;
  /** The method and the capability it needs. */
  constructor(method: string, capability: string) {
    super(`${method} needs capability "${capability}", which the executor did not advertise`);
    this.name = "CapabilityNotAdvertisedError";
    this.method = method;
    this.capability = capability;
  }
}

/** The method does not exist on this connection's protocol version; nothing was sent. */
export class MethodUnavailableError extends LocalError {
  /** The method. */
  readonly method: string;
  /** The connection's subprotocol. */
  readonly protocol: string;
  /** The method, the connection's subprotocol, and why the method is not on it. */
  constructor(method: string, protocol: string, why: string) {
    super(`${method} is not available on ${protocol || "this connection"}: ${why}`);
    this.name = "MethodUnavailableError";
    this.method = method;
    this.protocol = protocol;
  }
}

/**
 * An option of a call is not what it must be (a `signal` that is no `AbortSignal`, a negative
 * `timeoutMs`, ...); nothing was sent or started.
 */
export class InvalidCallOptionError extends LocalError {
  /** The method or operation called. */
  readonly method: string;
  /** The option's name. */
  readonly option: string;
  /** The call, the option, and what is wrong with it. */
  constructor(method: string, option: string, problem: string) {
    super(`${method}: option ${option} ${problem}`);
    this.name = "InvalidCallOptionError";
    this.method = method;
    this.option = option;
  }
}

/** Params given to `call`/`notify` do not match the contract; nothing was sent. */
export class InvalidOutgoingParamsError extends LocalError {
  /** The method. */
  readonly method: string;
  /** The contract's issues with the params (paths and messages). */
  readonly issues: readonly unknown[];
  /** The method and the issues with its params. */
  constructor(method: string, issues: readonly unknown[]) {
    super(`params of ${method} do not match the contract`);
    this.name = "InvalidOutgoingParamsError";
    this.method = method;
    this.issues = issues;
  }
}

/**
 * Throws {@linkcode InvalidOutgoingParamsError} for `method` when `params` is no object (a
 * `null` given by mistake would otherwise fail deep inside as a `TypeError`).
 */
export function requireParamsObject(method: string, params: unknown): void {
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    throw new InvalidOutgoingParamsError(method, [{
      path: [],
      message: "the params must be an object",
      code: "invalid_type",
    }]);
  }
}

/** The peer answered with a result that does not match the contract. */
export class InvalidResultError extends LocalError {
  /** The method. */
  readonly method: string;
  /** The contract's issues with the result (paths and messages). */
  readonly issues: readonly unknown[];
  /** The method and the issues with its result. */
  constructor(method: string, issues: readonly unknown[]) {
    super(`result of ${method} does not match the contract`);
    this.name = "InvalidResultError";
    this.method = method;
    this.issues = issues;
  }
}

/** A frame is over the connection's size limit. */
export class FrameTooLargeError extends LocalError {
  /** The frame's size in bytes. */
  readonly bytes: number;
  /** The limit in bytes. */
  readonly limit: number;
  /** The frame's size and the limit. */
  constructor(bytes: number, limit: number) {
    super(`frame of ${bytes} bytes exceeds the ${limit}-byte limit`);
    this.name = "FrameTooLargeError";
    this.bytes = bytes;
    this.limit = limit;
  }
}

/**
 * An error as a local log line reads it: its name and message. It stays local: the text of an
 * exception may name paths or values the peer must not see.
 */
export function describeError(error: unknown): string {
  try {
    return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  } catch {
    // A thrown value with no string form (a null-prototype object, a `toString` or getter
    // that throws, a Proxy): describing it must not throw out of the code that caught it.
    return "(a thrown value that cannot be described)";
  }
}
