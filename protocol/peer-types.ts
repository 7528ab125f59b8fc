/**
 * What a peer's users write against: the peer's options, a call's options, the handlers'
 * signatures and what a handler is told besides its params. They live apart from the
 * {@linkcode Peer} so that the shared handler table (`peer-handlers.ts`) and the peer can both
 * name them without importing each other.
 */
import type { ProtocolError } from "./errors.ts";
import type {
  NotificationMap,
  NotificationMethod,
  RequestMap,
  RequestMethod,
} from "./generated/contract.ts";
import type { JsonRpcId } from "./jsonrpc.ts";
import type { Clock } from "./clock.ts";
import type { Logger } from "./logger.ts";
import type { UnsentBudget } from "../transport/unsent-budget.ts";

/** Options of a {@linkcode Peer}. */
export interface PeerOptions {
  /**
   * The connection's protocol version, for `x-since` gating. Default: the transport's negotiated
   * subprotocol. On `bma.executor.v1`, methods added in v1.1 are unavailable both ways.
   */
  protocol?: string;
  /** Frames over this many UTF-8 bytes close the connection with 1009. Default 16 MiB. */
  maxFrameBytes?: number;
  /**
   * Outgoing frames over this many UTF-8 bytes are not sent: a request or notification throws
   * {@linkcode FrameTooLargeError}, a response is replaced by a -32603 `result_too_large` error.
   * Default `maxFrameBytes`; lower when the other side accepts less.
   */
  maxSendBytes?: number;
  /**
   * Frames that nest arrays and objects deeper than this (the frame's own object is level 1)
   * are refused unparsed, and the connection stays: a request is answered -32600 with
   * `data.reason` `too_deep` (and `max_depth`), a notification dropped, a response rejects its
   * request with {@linkcode InvalidResultError}. Default 128 ({@linkcode DEFAULT_MAX_DEPTH}).
   */
  maxFrameDepth?: number;
  /** Default timeout of an outgoing request, in ms; `0` waits forever. Default 60 s. */
  requestTimeoutMs?: number;
  /**
   * The link counts as congested while the transport holds more than this many bytes not yet
   * sent ({@linkcode Transport.bufferedAmount}): then the contract's lossy notifications
   * (`x-lossy`) are dropped, not queued, except a chunk that ends its stream (`eof: true`).
   * Default 1 MiB ({@linkcode DEFAULT_MAX_BUFFERED_BYTES}).
   */
  maxBufferedBytes?: number;
  /**
   * The most the transport may hold unsent ({@linkcode Transport.bufferedAmount}): a send that
   * leaves more closes the connection (1011), because a peer that reads nothing would otherwise
   * hold the sender's memory without bound. The peer reconnects and resumes: what was not
   * acknowledged is sent again. Default 64 MiB ({@linkcode DEFAULT_MAX_QUEUED_BYTES}): four
   * frames of the largest size.
   */
  maxQueuedBytes?: number;
  /**
   * A budget of unsent bytes this peer shares with the other connections of its server: each
   * send reports what the transport holds, and past the budget the connections that hold the
   * most are ended at once (1011, what they hold discarded). Default: none (only
   * {@linkcode PeerOptions.maxQueuedBytes} bounds it).
   */
  unsentBudget?: UnsentBudget;
  /** Time and timers. Default: the system clock. */
  clock?: Clock;
  /** Where diagnostics go. Default: nowhere. */
  logger?: Logger;
  /**
   * The executor's advertised capabilities (`executor.register` params), against which methods
   * with an `x-capability` are gated in both directions. `undefined` (not yet registered)
   * refuses every gated method. Settable later with {@linkcode Peer.capabilities}.
   */
  capabilities?: unknown;
  /** Validate params of outgoing requests and notifications against the contract. Default true. */
  validateOutgoing?: boolean;
  /**
   * Handlers shared with other peers (every connection of a server), consulted when this peer
   * has no handler of its own for a method: a {@linkcode PeerHandlers} of any owner type.
   */
  handlers?: HandlerTable;
  /** What the shared {@linkcode PeerOptions.handlers} receive as their owner (the connection). */
  owner?: unknown;
}

/** Per-request options of {@linkcode Peer.call}. */
export interface CallOptions {
  /** Aborts the request: it rejects with {@linkcode RequestAbortedError}. */
  signal?: AbortSignal;
  /** Overrides the peer's default timeout, in ms; `0` waits forever. */
  timeoutMs?: number;
  /**
   * Sends the request under this id instead of a fresh one: a request resent after a reconnect
   * keeps its id, so a peer that deduplicates by JSON-RPC id sees a repeat.
   */
  id?: JsonRpcId;
  /**
   * The params were checked against the contract already (e.g. when a call was queued): skip
   * the outgoing check for this request.
   */
  prevalidated?: boolean;
  /**
   * Gets the result (checked against the contract) of a response that arrives after the request
   * timed out or was aborted, e.g. to undo what the peer did meanwhile. Called at most once, and
   * not for an error response or after the connection ended; the peer remembers the latest
   * 1,024 requests given up on.
   */
  onLateResult?: (result: unknown) => void;
}

/** What a request handler is told besides its params. */
export interface RequestContext {
  /** The request's id. */
  readonly id: JsonRpcId;
  /** The method name. */
  readonly method: string;
  /** Aborted when the connection ends before the handler has answered. */
  readonly signal: AbortSignal;
  /**
   * The length of the text frame that carried the request, in UTF-16 code units (its bytes, for
   * ASCII JSON); 0 for a message handed over as an object.
   */
  readonly frameLength: number;
  /**
   * Runs `fn` once the response to this request has been handed to the transport (after an
   * error response too): what must follow the answer on the wire — a request to the peer that
   * presumes it, a close after a refusal — goes here. Hooks run in the order added.
   */
  afterReply(fn: () => void): void;
}

/**
 * The SDK's one "after the reply": work that must follow a request's response on the wire (a
 * tool call's handler after its ack, `session.ready` after the assignment's answer, a close
 * after a refusal). A {@linkcode RequestContext} is one, passed on by a handler to what it
 * starts; an {@linkcode AdmissionGate} gets one for the refusal it returns.
 */
export interface ReplyHooks {
  /** Runs `fn` after the response has been handed to the transport. */
  afterReply(fn: () => void): void;
}

/** Serves one request method; throw a {@linkcode ProtocolError} to answer with its code and data. */
export type RequestHandler<M extends RequestMethod> = (
  params: RequestMap[M]["params"],
  context: RequestContext,
) => RequestMap[M]["result"] | Promise<RequestMap[M]["result"]>;

/** Receives one notification method. */
export type NotificationHandler<M extends NotificationMethod> = (
  params: NotificationMap[M],
) => void | Promise<void>;

/** Undoes a registration. */
export interface Disposable {
  /** Undoes it; a second call does nothing. */
  dispose(): void;
}

/**
 * Decides whether an incoming message may be dispatched; returns an error to refuse it (a
 * request is answered with it, a notification dropped), or `undefined` to admit it.
 */
export type AdmissionGate = (
  method: string,
  kind: "request" | "notification",
  reply?: ReplyHooks,
) =>
  | ProtocolError
  | undefined;

/** A request handler as the tables hold it: of no method in particular. */
export type AnyRequestHandler = (
  params: unknown,
  context: RequestContext,
  owner?: unknown,
) => unknown;
/** A notification handler as the tables hold it: of no method in particular. */
export type AnyNotificationHandler = (params: unknown, owner?: unknown) => unknown;

/** Serves one request method for every peer of a {@linkcode PeerHandlers} table. */
export type SharedRequestHandler<M extends RequestMethod, O> = (
  params: RequestMap[M]["params"],
  context: RequestContext,
  owner: O,
) => RequestMap[M]["result"] | Promise<RequestMap[M]["result"]>;

/** Receives one notification method for every peer of a {@linkcode PeerHandlers} table. */
export type SharedNotificationHandler<M extends NotificationMethod, O> = (
  params: NotificationMap[M],
  owner: O,
) => void | Promise<void>;

/** What a peer reads of a shared handler table ({@linkcode PeerHandlers}, of any owner type). */
export interface HandlerTable {
  /** Run after the peer's own {@linkcode Peer.admit} has admitted a message. */
  readonly admit:
    | ((
      owner: never,
      method: string,
      kind: "request" | "notification",
      reply?: ReplyHooks,
    ) => ProtocolError | undefined)
    | undefined;
  /** Told of each refusal a peer makes (see {@linkcode PeerHandlers.refused}). */
  readonly refused: ((owner: never, code: number) => void) | undefined;
  /** The handler of a request method; it is called with the peer's owner as third argument. */
  request(
    method: string,
  ): ((params: unknown, context: RequestContext, owner: never) => unknown) | undefined;
  /** The handler of a notification method; it is called with the peer's owner as second argument. */
  notification(method: string): ((params: unknown, owner: never) => unknown) | undefined;
}
