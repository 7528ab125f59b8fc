/**
 * Local failures of the harness end. None of them crossed the wire: wire errors are the
 * contract's generated {@linkcode ProtocolError} subclasses (a `session.assign` refused with
 * -32009 rejects with `ResourceExhaustedError`, and so on).
 */
import { LocalError } from "../protocol/errors.ts";

/** Why the outcome of a tool call can no longer be known. */
export type ToolOutcomeUnknownReason =
  | "lease_expired"
  | "executor_closed"
  | "session_ended"
  | "session_lost"
  | "dispatch_failed"
  | "harness_closed";

/**
 * The tool call may or may not have run, and its result will never arrive: the executor's lease
 * expired, the executor closed for good, or the session ended before a `tool.result` came.
 */
export class ToolOutcomeUnknownError extends LocalError {
  /** The call. */
  readonly toolCallId: string;
  /** The call's session. */
  readonly sessionId: string;
  /** Why the result will not come. */
  readonly reason: ToolOutcomeUnknownReason;
  /** The call, its session, why its result will not come, and the failure behind it as `cause`. */
  constructor(
    toolCallId: string,
    sessionId: string,
    reason: ToolOutcomeUnknownReason,
    options?: { cause?: unknown },
  ) {
    super(`outcome of tool call ${toolCallId} is unknown (${reason})`, options);
    this.name = "ToolOutcomeUnknownError";
    this.toolCallId = toolCallId;
    this.sessionId = sessionId;
    this.reason = reason;
  }
}

/** Why a session could not be assigned, decided on this side before anything was sent. */
export type SessionRefusedReason = "draining" | "executor_unavailable" | "session_exists";

/**
 * `assignSession` refused locally: the executor is draining or gone, or the id is taken
 * (`session_exists`: by a live session of another executor, or by an ended one the store still
 * remembers, see `rememberEndedSessions`).
 */
export class SessionRefusedError extends LocalError {
  /** The session id that was refused. */
  readonly sessionId: string;
  /** Why it was refused. */
  readonly reason: SessionRefusedReason;
  /** The refused session id and why. */
  constructor(sessionId: string, reason: SessionRefusedReason) {
    super(`session ${sessionId} refused (${reason})`);
    this.name = "SessionRefusedError";
    this.sessionId = sessionId;
    this.reason = reason;
  }
}

/**
 * The session has ended, so nothing more can be sent for it; or it is stopping (`reason`
 * `stopping`), so nothing new starts in it.
 */
export class SessionEndedError extends LocalError {
  /** The session. */
  readonly sessionId: string;
  /**
   * Why it ended (`stopped`, `lease_expired`, the executor's `session.ended` reason, ...), or
   * `stopping`: a stop is under way, and nothing new starts in it.
   */
  readonly reason: string;
  /** The ended session and why it ended. */
  constructor(sessionId: string, reason: string) {
    super(`session ${sessionId} has ended (${reason})`);
    this.name = "SessionEndedError";
    this.sessionId = sessionId;
    this.reason = reason;
  }
}

/** Why an executor cannot be reached. */
export type ExecutorUnavailableReason = "disconnected" | "gone";

/**
 * The executor is not connected right now (`disconnected`: it may still resume within its
 * lease) or is gone for good (`gone`: lease expired, replaced without resume, or closed).
 */
export class ExecutorUnavailableError extends LocalError {
  /** The executor. */
  readonly executorId: string;
  /** Whether it may still come back (`disconnected`) or not (`gone`). */
  readonly reason: ExecutorUnavailableReason;
  /** The executor and whether it is disconnected or gone. */
  constructor(executorId: string, reason: ExecutorUnavailableReason) {
    super(`executor ${executorId} is ${reason === "gone" ? "gone" : "not connected"}`);
    this.name = "ExecutorUnavailableError";
    this.executorId = executorId;
    this.reason = reason;
  }
}

/** An option of `new Harness(...)` (or of `serve`) cannot work; `option` names it. */
export class HarnessConfigError extends LocalError {
  /** The option's name. */
  readonly option: string;
  /** The option, and what is wrong with it. */
  constructor(option: string, problem: string) {
    super(`${option} ${problem}`);
    this.name = "HarnessConfigError";
    this.option = option;
  }
}

/** `serve()` / `serveUnix()` was called on a harness built without a server factory. */
export class NoServerFactoryError extends LocalError {
  constructor() {
    super(
      "this Harness has no server factory: pass `server` (e.g. serveWebSocket from " +
        "transport/node.ts) or import Harness from harness/node.ts",
    );
    this.name = "NoServerFactoryError";
  }
}

/** `dial()` was called on a harness built without a dialer. */
export class NoDialerError extends LocalError {
  constructor() {
    super(
      "this Harness has no dialer: pass `dial` (e.g. dialWebSocket from transport/node.ts) or " +
        "import Harness from a runtime entry point (node.ts, deno.ts, bun.ts)",
    );
    this.name = "NoDialerError";
  }
}

/** `serve()` on TCP without `authenticate` and without the explicit `insecureNoAuth` opt-out. */
export class InsecureServeError extends LocalError {
  constructor() {
    super(
      "refusing to serve TCP without authenticate: pass authenticate (or tokens), or set " +
        "insecureNoAuth: true for a trusted network",
    );
    this.name = "InsecureServeError";
  }
}

/** `accept()` refused a transport: `authenticate` rejected its request. */
export class ConnectRefusedError extends LocalError {
  /** The refusal of `authenticate` as `cause`. */
  constructor(options?: { cause?: unknown }) {
    super("connection refused: authentication failed", options);
    this.name = "ConnectRefusedError";
  }
}

/** The harness was closed; waiting operations end with this. */
export class HarnessClosedError extends LocalError {
  constructor() {
    super("the harness is closed");
    this.name = "HarnessClosedError";
  }
}

/** The MCP channel is closed: nothing more can be sent on it. */
export class McpChannelClosedError extends LocalError {
  /** The channel. */
  readonly channelId: string;
  /** The closed channel and why it closed. */
  constructor(channelId: string, reason: string) {
    super(`MCP channel ${channelId} is closed${reason ? ` (${reason})` : ""}`);
    this.name = "McpChannelClosedError";
    this.channelId = channelId;
  }
}

/** Why a token was rejected; never carries the token itself. */
export type TokenRejectedReason =
  | "malformed"
  | "algorithm"
  | "signature"
  | "expired"
  | "issuer"
  | "claims"
  | "credential";

/** A JWT failed verification. The message names the reason only, never the token. */
export class TokenRejectedError extends LocalError {
  /**
   * What failed: the format, the algorithm, the signature, the expiry, the issuer, a claim, or
   * the credential it was issued for, which this harness no longer has.
   */
  readonly reason: TokenRejectedReason;
  /** Why the token was rejected (never the token itself). */
  constructor(reason: TokenRejectedReason) {
    super(`token rejected (${reason})`);
    this.name = "TokenRejectedError";
    this.reason = reason;
  }
}

/** An agent method was used on a harness built without `agent` (an `AgentPlatform`). */
export class NoAgentPlatformError extends LocalError {
  /** The error, with a message that says how to give the harness an agent platform. */
  constructor(
    message =
      "this Harness has no agent platform: pass new Harness({ agent: new AgentPlatform() })",
  ) {
    super(message);
    this.name = "NoAgentPlatformError";
  }
}

/**
 * The reader of an event stream (the inspector's live updates) fell more than `limitBytes` behind:
 * the stream errors with this, which discards what it held for that reader, and the server drops
 * the connection. A page reconnects and loads afresh.
 */
export class StreamBacklogError extends LocalError {
  /** The most a stream holds for a reader that is behind. */
  readonly limitBytes: number;
  /** The bound the reader went past. */
  constructor(limitBytes: number) {
    super(`the stream's reader fell more than ${limitBytes} bytes behind`);
    this.name = "StreamBacklogError";
    this.limitBytes = limitBytes;
  }
}
