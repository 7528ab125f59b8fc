/**
 * One end of a JSON-RPC 2.0 connection speaking the contract: it validates every incoming
 * request against the contract before its handler runs, correlates responses, gates methods by
 * protocol version and capability, and ends every pending request exactly once.
 *
 * It knows nothing about sockets: it reads and writes text frames through a {@linkcode Transport}.
 */
import {
  type CloseInfo,
  isMessageTransport,
  type MessageTransport,
  type Transport,
  TransportClosedError,
} from "../transport/transport.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "../transport/bytes.ts";
import { hasCapability } from "./capabilities.ts";
import { BoundedSet } from "./bounded-set.ts";
import { type Clock, systemClock, type TimerHandle } from "./clock.ts";
import {
  CapabilityNotAdvertisedError,
  ConnectionClosedError,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  InvalidResultError,
  LocalError,
  MethodUnavailableError,
  ProtocolError,
  RequestAbortedError,
  RequestTimeoutError,
} from "./errors.ts";
import {
  METHOD_SPECS,
  type MethodSpec,
  type NotificationMap,
  type NotificationMethod,
  type RequestMap,
  type RequestMethod,
} from "./generated/contract.ts";
import { CloseCode, ErrorCode, protocolErrorFromWire } from "./generated/errors.ts";
import {
  DEFAULT_MAX_DEPTH,
  exceedsBytes,
  exceedsDepth,
  isErrorObject,
  isJsonRpcId,
  type JsonRpcFailure,
  type JsonRpcId,
  type JsonRpcResponse,
  withoutDeepValues,
} from "./jsonrpc.ts";
import { type Logger, silentLogger } from "./logger.ts";

export { DEFAULT_MAX_FRAME_BYTES } from "../transport/bytes.ts";
export { DEFAULT_MAX_DEPTH } from "./jsonrpc.ts";
/** The default time a request waits for its response: 60 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** Unsent bytes past which a connection is closed: 64 MiB ({@linkcode PeerOptions.maxQueuedBytes}). */
export const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

/** Unsent bytes past which a link counts as congested: 1 MiB ({@linkcode PeerOptions.maxBufferedBytes}). */
export const DEFAULT_MAX_BUFFERED_BYTES = 1024 * 1024;
/** WebSocket close code for a frame over the size limit. */
const MESSAGE_TOO_BIG = 1009;
const V1 = "bma.executor.v1";

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

/** What an {@linkcode AdmissionGate} may defer until the refusal it returns has been sent. */
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

interface Pending {
  readonly method: string;
  readonly spec: MethodSpec;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
  /**
   * When a request on the peer's default timeout expires (0: it has its own timer, or none).
   * These deadlines grow with insertion order, so one sweep timer serves them all.
   */
  readonly deadline: number;
  timer: TimerHandle | undefined;
  detach: (() => void) | undefined;
}

type AnyRequestHandler = (params: unknown, context: RequestContext, owner?: unknown) => unknown;
type AnyNotificationHandler = (params: unknown, owner?: unknown) => unknown;

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
  /** The handler of a request method; it is called with the peer's owner as third argument. */
  request(
    method: string,
  ): ((params: unknown, context: RequestContext, owner: never) => unknown) | undefined;
  /** The handler of a notification method; it is called with the peer's owner as second argument. */
  notification(method: string): ((params: unknown, owner: never) => unknown) | undefined;
}

/**
 * Request and notification handlers shared by many peers (e.g. every connection of a server):
 * one table, where handlers registered per peer cost a closure and a map entry per method per
 * connection. Each handler receives the `owner` its peer was given ({@linkcode PeerOptions}).
 * A peer's own handlers take precedence over the table's.
 */
export class PeerHandlers<O> implements HandlerTable {
  /** Optional gate run after the peer's own {@linkcode Peer.admit} has admitted a message. */
  admit:
    | ((
      owner: O,
      method: string,
      kind: "request" | "notification",
      reply?: ReplyHooks,
    ) => ProtocolError | undefined)
    | undefined;
  readonly #requests = new Map<string, AnyRequestHandler>();
  readonly #notifications = new Map<string, AnyNotificationHandler>();

  /** Serves a request method on every peer of the table. Registering again replaces it. */
  onRequest<M extends RequestMethod>(method: M, handler: SharedRequestHandler<M, O>): this {
    requireMethod(method, "request");
    this.#requests.set(method, handler as AnyRequestHandler);
    return this;
  }

  /** Receives a notification method on every peer of the table. Registering again replaces it. */
  onNotification<M extends NotificationMethod>(
    method: M,
    handler: SharedNotificationHandler<M, O>,
  ): this {
    requireMethod(method, "notification");
    this.#notifications.set(method, handler as AnyNotificationHandler);
    return this;
  }

  /** The handler of a request method, if the table serves it. */
  request(
    method: string,
  ): ((params: unknown, context: RequestContext, owner?: unknown) => unknown) | undefined {
    return this.#requests.get(method);
  }

  /** The handler of a notification method, if the table serves it. */
  notification(method: string): ((params: unknown, owner?: unknown) => unknown) | undefined {
    return this.#notifications.get(method);
  }
}

function requireMethod(method: string, kind: "request" | "notification"): void {
  const spec = METHOD_SPECS.get(method);
  if (!spec) throw new LocalError(`${method} is not a method of the contract`);
  if (spec.kind !== kind) throw new LocalError(`${method} is a ${spec.kind}, not a ${kind}`);
}

/** What {@linkcode checked} returns for a value outside the contract: why. */
class Refused {
  readonly issues: ValidationIssue[];
  constructor(issues: ValidationIssue[]) {
    this.issues = issues;
  }
}

/**
 * Checks a value against the contract: the generated predicate admits almost every valid value
 * as it is (nothing allocated); zod decides the rest, returning its data or why it refused.
 */
function checked(
  accepts: (value: unknown) => boolean,
  schema: MethodSpec["params"],
  value: unknown,
): unknown {
  if (accepts(value)) return value;
  const parsed = schema.safeParse(value);
  return parsed.success ? parsed.data : new Refused(toIssues(parsed.error));
}

/** Issues as sent in `data.issues` of a -32602 answer. */
export interface ValidationIssue {
  /** Where in the params: member names and array indexes. */
  path: (string | number)[];
  /** What is wrong there. */
  message: string;
  /** The kind of issue (zod's code). */
  code: string;
}

function toIssues(
  error: { issues: readonly { path: PropertyKey[]; message: string; code: string }[] },
): ValidationIssue[] {
  return error.issues.map((i) => ({
    path: i.path.map((p) => (typeof p === "symbol" ? String(p) : p)),
    message: i.message,
    code: i.code,
  }));
}

// Shared empty collections of peers that have not written theirs yet: never written themselves.
const NO_PENDING = new Map<JsonRpcId, never>();
const NO_HANDLERS = new Map<string, never>();
const NO_REQUESTS = new Set<never>();

/** A JSON-RPC 2.0 peer bound to one transport and the contract. */
export class Peer {
  /** Settles when the connection has ended, with the close code and reason this side saw. */
  readonly closed: Promise<CloseInfo>;
  /** The connection's protocol version. */
  readonly protocol: string;
  /** The executor's advertised capabilities used for gating (see {@linkcode PeerOptions}). */
  capabilities: unknown;
  /** Optional gate consulted before any incoming request or notification is dispatched. */
  admit: AdmissionGate | undefined;

  readonly #transport: Transport;
  /** Set when the transport hands over message objects: nothing is serialized or parsed. */
  readonly #direct: MessageTransport | undefined;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #maxFrameBytes: number;
  readonly #maxBufferedBytes: number;
  readonly #maxQueuedBytes: number;
  #dropped = 0;
  readonly #maxDepth: number;
  readonly #timeoutMs: number;
  readonly #validateOutgoing: boolean;
  // The maps and the set below start as shared empty ones, never written, and are made on the
  // first write: a server holds a peer per idle connection, where even empty Maps add up.
  #pending: Map<JsonRpcId, Pending> = NO_PENDING;
  /** Ids of requests given up on (timeout, abort), made when the first is. */
  #abandoned: BoundedSet<JsonRpcId> | undefined;
  #requestHandlers: Map<string, AnyRequestHandler> = NO_HANDLERS;
  #notificationHandlers: Map<string, AnyNotificationHandler> = NO_HANDLERS;
  #inFlight: Set<IncomingRequest> = NO_REQUESTS;
  /** Handlers shared with other peers, and what they receive as owner. */
  readonly #shared: PeerHandlers<unknown> | undefined;
  readonly #owner: unknown;
  /** The one timer that expires requests on the default timeout (see {@linkcode Pending}). */
  #sweepTimer: TimerHandle | undefined;
  #nextId = 1;
  #closeInfo: CloseInfo | undefined;
  /** The length of the text frame being dispatched (0: a message object). */
  #frameLength = 0;

  /**
   * Binds the peer to `transport` and starts reading at once: frames the transport buffered
   * before (a peer that spoke first) may be dispatched during construction, before any
   * `onRequest` registered afterwards. Where the other side may speak first, pass the handlers
   * in {@linkcode PeerOptions.handlers} (a {@linkcode PeerHandlers} table).
   */
  constructor(transport: Transport, options: PeerOptions = {}) {
    this.#transport = transport;
    this.protocol = options.protocol ?? transport.protocol;
    this.#clock = options.clock ?? systemClock;
    this.#logger = options.logger ?? silentLogger;
    this.#maxFrameBytes = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.#maxBufferedBytes = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    this.#maxQueuedBytes = options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES;
    this.#maxDepth = options.maxFrameDepth ?? DEFAULT_MAX_DEPTH;
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#validateOutgoing = options.validateOutgoing ?? true;
    this.capabilities = options.capabilities;
    this.#shared = options.handlers as PeerHandlers<unknown> | undefined;
    this.#owner = options.owner;
    this.closed = transport.closed.then((info) => {
      this.#shutdown(info);
      return info;
    });
    if (isMessageTransport(transport)) {
      this.#direct = transport;
      transport.listenMessages((message) => this.#receive(message));
    } else {
      this.#direct = undefined;
      transport.listen((frame) => this.#receive(frame));
    }
  }

  /** Whether the connection has ended. */
  get isClosed(): boolean {
    return this.#closeInfo !== undefined;
  }

  /** How many outgoing requests await their response. */
  get pendingRequests(): number {
    return this.#pending.size;
  }

  /** Serves a request method. Registering a method again replaces its handler. */
  onRequest<M extends RequestMethod>(method: M, handler: RequestHandler<M>): Disposable {
    this.#requireSpec(method, "request");
    if (this.#requestHandlers === NO_HANDLERS) this.#requestHandlers = new Map();
    this.#requestHandlers.set(method, handler as AnyRequestHandler);
    return {
      dispose: () => {
        if (this.#requestHandlers.get(method) === handler) this.#requestHandlers.delete(method);
      },
    };
  }

  /** Receives a notification method. Registering a method again replaces its handler. */
  onNotification<M extends NotificationMethod>(
    method: M,
    handler: NotificationHandler<M>,
  ): Disposable {
    this.#requireSpec(method, "notification");
    if (this.#notificationHandlers === NO_HANDLERS) this.#notificationHandlers = new Map();
    this.#notificationHandlers.set(method, handler as AnyNotificationHandler);
    return {
      dispose: () => {
        if (this.#notificationHandlers.get(method) === handler) {
          this.#notificationHandlers.delete(method);
        }
      },
    };
  }

  /**
   * Sends a request and resolves with its result, validated against the contract.
   *
   * Rejects with the contract's {@linkcode ProtocolError} subclass for an error response, or a
   * {@linkcode LocalError}: {@linkcode ConnectionClosedError}, {@linkcode RequestTimeoutError},
   * {@linkcode RequestAbortedError}, {@linkcode CapabilityNotAdvertisedError},
   * {@linkcode MethodUnavailableError}, {@linkcode InvalidOutgoingParamsError},
   * {@linkcode FrameTooLargeError} or {@linkcode InvalidResultError}.
   */
  call<M extends RequestMethod>(
    method: M,
    params: RequestMap[M]["params"],
    options: CallOptions = {},
  ): Promise<RequestMap[M]["result"]> {
    return new Promise((resolve, reject) => {
      const spec = this.#outgoingSpec(method, "request", params, options.prevalidated !== true);
      const signal = options.signal;
      if (signal?.aborted) throw new RequestAbortedError(method, signal.reason);
      const id = options.id ?? this.#nextId++;
      if (this.#pending.has(id)) throw new LocalError(`request id ${JSON.stringify(id)} is in use`);
      const message = { jsonrpc: "2.0", id, method, params };
      const frame = this.#direct ? undefined : JSON.stringify(message);
      if (frame !== undefined && exceedsBytes(frame, this.#maxFrameBytes)) {
        throw new FrameTooLargeError(frame.length, this.#maxFrameBytes);
      }
      const timeoutMs = options.timeoutMs ?? this.#timeoutMs;
      // A timer per request costs more than the request itself: requests on the default
      // timeout share one sweep; only other timeouts get their own timer.
      const swept = timeoutMs > 0 && timeoutMs === this.#timeoutMs;
      const pending: Pending = {
        method,
        spec,
        resolve: resolve as (value: unknown) => void,
        reject,
        deadline: swept ? this.#clock.now() + timeoutMs : 0,
        timer: undefined,
        detach: undefined,
      };
      if (swept) {
        if (this.#sweepTimer === undefined) this.#armSweep(pending.deadline);
      } else if (timeoutMs > 0) {
        pending.timer = this.#clock.setTimeout(
          () => this.#settle(id, undefined, new RequestTimeoutError(method, timeoutMs)),
          timeoutMs,
        );
      }
      if (signal) {
        const onAbort = () =>
          this.#settle(id, undefined, new RequestAbortedError(method, signal.reason));
        signal.addEventListener("abort", onAbort, { once: true });
        pending.detach = () => signal.removeEventListener("abort", onAbort);
      }
      if (this.#pending === NO_PENDING) this.#pending = new Map();
      this.#pending.set(id, pending);
      this.#abandoned?.delete(id);
      try {
        if (frame === undefined) this.#direct!.sendMessage(message);
        else {
          this.#transport.send(frame);
          this.#bound();
        }
      } catch (error) {
        // A closed transport has settled `closed`: the shutdown rejects this request with the
        // close code. Anything else is this request's own failure.
        if (!(error instanceof TransportClosedError)) this.#settle(id, undefined, error);
      }
    });
  }

  /**
   * Sends a notification. Throws the same local errors as {@linkcode Peer.call} would. A lossy
   * one (`x-lossy` in the contract) is dropped while the link is congested (see
   * {@linkcode PeerOptions.maxBufferedBytes}): then this returns false, and
   * {@linkcode Peer.droppedNotifications} counts it.
   */
  notify<M extends NotificationMethod>(method: M, params: NotificationMap[M]): boolean {
    const spec = this.#outgoingSpec(method, "notification", params, true);
    if (spec.lossy && this.congested && (params as { eof?: unknown })?.eof !== true) {
      this.#dropped++;
      return false;
    }
    const message = { jsonrpc: "2.0", method, params };
    const frame = this.#direct ? undefined : JSON.stringify(message);
    if (frame !== undefined && exceedsBytes(frame, this.#maxFrameBytes)) {
      throw new FrameTooLargeError(frame.length, this.#maxFrameBytes);
    }
    try {
      if (frame === undefined) this.#direct!.sendMessage(message);
      else this.#transport.send(frame);
    } catch {
      throw this.#closedError();
    }
    if (frame !== undefined) this.#bound();
    return true;
  }

  /** Closes a connection whose peer let more than `maxQueuedBytes` pile up unsent. */
  #bound(): void {
    const queued = this.#transport.bufferedAmount;
    if (queued === undefined || queued <= this.#maxQueuedBytes || this.#closeInfo) return;
    this.#logger.warn("peer reads nothing: closing the connection", {
      unsent_bytes: queued,
      max_queued_bytes: this.#maxQueuedBytes,
    });
    this.#transport.close(CloseCode.INTERNAL_ERROR, "the peer reads nothing: unsent backlog");
  }

  /**
   * Whether the transport holds more unsent bytes than {@linkcode PeerOptions.maxBufferedBytes}
   * (false where the transport cannot tell).
   */
  get congested(): boolean {
    return (this.#transport.bufferedAmount ?? 0) > this.#maxBufferedBytes;
  }

  /** Lossy notifications dropped so far because the link was congested. */
  get droppedNotifications(): number {
    return this.#dropped;
  }

  /** Closes the connection (default 1000). Pending requests reject with {@linkcode ConnectionClosedError}. */
  close(code = 1000, reason = ""): Promise<CloseInfo> {
    this.#transport.close(code, reason);
    return this.closed;
  }

  // ---- outgoing ------------------------------------------------------------------------------

  #requireSpec(method: string, kind: "request" | "notification"): MethodSpec {
    const spec = METHOD_SPECS.get(method);
    if (!spec) throw new LocalError(`${method} is not a method of the contract`);
    if (spec.kind !== kind) throw new LocalError(`${method} is a ${spec.kind}, not a ${kind}`);
    return spec;
  }

  #outgoingSpec(
    method: string,
    kind: "request" | "notification",
    params: unknown,
    validate: boolean,
  ): MethodSpec {
    if (this.#closeInfo) throw this.#closedError();
    const spec = this.#requireSpec(method, kind);
    if (spec.since !== V1 && this.protocol === V1) {
      throw new MethodUnavailableError(method, this.protocol, `it was added in ${spec.since}`);
    }
    if (spec.capability && !hasCapability(this.capabilities, spec.capability)) {
      throw new CapabilityNotAdvertisedError(method, spec.capability);
    }
    if (validate && this.#validateOutgoing) {
      const verdict = checked(spec.acceptsParams, spec.params, params);
      if (verdict instanceof Refused) throw new InvalidOutgoingParamsError(method, verdict.issues);
    }
    return spec;
  }

  #closedError(): ConnectionClosedError {
    const info = this.#closeInfo;
    return info
      ? new ConnectionClosedError(info.code, info.reason)
      : new ConnectionClosedError(1006, "");
  }

  /** Ends a pending request exactly once. */
  #settle(id: JsonRpcId, result: unknown, error?: unknown): void {
    const pending = this.#pending.get(id);
    if (!pending) return;
    this.#pending.delete(id);
    if (pending.timer !== undefined) this.#clock.clearTimeout(pending.timer);
    pending.detach?.();
    if (error !== undefined) {
      if (error instanceof RequestTimeoutError || error instanceof RequestAbortedError) {
        this.#abandon(id);
      }
      pending.reject(error);
      return;
    }
    const verdict = checked(pending.spec.acceptsResult!, pending.spec.result!, result);
    if (verdict instanceof Refused) {
      pending.reject(new InvalidResultError(pending.method, verdict.issues));
    } else pending.resolve(verdict);
  }

  #armSweep(at: number): void {
    this.#sweepTimer = this.#clock.setTimeout(
      () => this.#sweep(),
      Math.max(0, at - this.#clock.now()),
    );
  }

  /**
   * Expires the requests on the default timeout whose deadline has passed, oldest first, and
   * re-arms for the oldest that has not. Settled requests leave the sweep armed: it finds
   * nothing, which is cheaper than a timer set and cleared per request.
   */
  #sweep(): void {
    this.#sweepTimer = undefined;
    const now = this.#clock.now();
    for (const [id, pending] of this.#pending) {
      if (pending.deadline === 0) continue;
      if (pending.deadline > now) {
        this.#armSweep(pending.deadline);
        return;
      }
      this.#settle(id, undefined, new RequestTimeoutError(pending.method, this.#timeoutMs));
    }
  }

  /** Remembers ids whose late responses are expected, so they are not reported as unknown. */
  #abandon(id: JsonRpcId): void {
    (this.#abandoned ??= new BoundedSet(1024)).add(id);
  }

  // ---- incoming ------------------------------------------------------------------------------

  /** One text frame, or one message object from a {@linkcode MessageTransport}. */
  #receive(frame: string | object): void {
    if (this.#closeInfo) return;
    let message: unknown = frame;
    if (typeof frame === "string") {
      if (exceedsBytes(frame, this.#maxFrameBytes)) {
        this.#logger.warn("frame over the size limit: closing", { limit: this.#maxFrameBytes });
        this.#transport.close(MESSAGE_TOO_BIG, "frame too large");
        return;
      }
      if (exceedsDepth(frame, this.#maxDepth)) {
        this.#refuseDeep(frame);
        return;
      }
      try {
        message = JSON.parse(frame);
      } catch {
        this.#send(failure(null, ErrorCode.PARSE_ERROR, "parse error"));
        return;
      }
    }
    if (Array.isArray(message)) {
      // The contract uses no batches: an array is one invalid request.
      this.#send(failure(null, ErrorCode.INVALID_REQUEST, "invalid request: batches are not used"));
      return;
    }
    this.#frameLength = typeof frame === "string" ? frame.length : 0;
    const answer = this.#dispatch(message);
    if (answer instanceof Promise) answer.then((response) => response && this.#send(response));
    else if (answer) this.#send(answer);
  }

  /**
   * A frame nested deeper than the limit: its envelope is read with the deep values cut out,
   * and it is refused as a whole (see {@linkcode PeerOptions.maxFrameDepth}).
   */
  #refuseDeep(frame: string): void {
    const limit = this.#maxDepth;
    let m: Record<string, unknown> | undefined;
    try {
      const envelope: unknown = JSON.parse(withoutDeepValues(frame, limit));
      if (typeof envelope === "object" && envelope !== null && !Array.isArray(envelope)) {
        m = envelope as Record<string, unknown>;
      }
    } catch {
      // Not JSON either: answered below like any frame whose id cannot be read.
    }
    const id = m && isJsonRpcId(m.id) ? m.id : null;
    if (m && !("method" in m) && ("result" in m || "error" in m)) {
      const pending = id === null ? undefined : this.#pending.get(id);
      this.#logger.warn("response nested too deep refused", { id, limit });
      if (pending) {
        this.#settle(
          id!,
          undefined,
          new InvalidResultError(pending.method, [
            { path: [], message: `nested deeper than ${limit} levels`, code: "too_deep" },
          ]),
        );
      }
      return;
    }
    if (m && typeof m.method === "string" && !("id" in m)) {
      this.#logger.warn("notification nested too deep dropped", { method: m.method, limit });
      return;
    }
    this.#logger.warn("frame nested too deep refused", { id, limit });
    this.#send(
      failure(id, ErrorCode.INVALID_REQUEST, "invalid request: nested too deep", {
        reason: "too_deep",
        max_depth: limit,
      }),
    );
  }

  /** Handles one message; returns the response to send, if any. Never throws or rejects. */
  #dispatch(message: unknown): JsonRpcResponse | undefined | Promise<JsonRpcResponse | undefined> {
    if (typeof message !== "object" || message === null) {
      return failure(null, ErrorCode.INVALID_REQUEST, "invalid request: not an object");
    }
    const m = message as Record<string, unknown>;
    const hasId = "id" in m;
    const idOk = hasId && isJsonRpcId(m.id);
    if (m.jsonrpc !== "2.0") {
      // A broken response cannot be answered (that would loop between peers): drop it.
      if (!("method" in m) && ("result" in m || "error" in m)) {
        return this.#dropResponse(m, "jsonrpc is not 2.0");
      }
      return failure(
        idOk ? m.id as JsonRpcId : null,
        ErrorCode.INVALID_REQUEST,
        'invalid request: jsonrpc must be "2.0"',
      );
    }
    if ("method" in m) {
      if (typeof m.method !== "string") {
        return failure(
          idOk ? m.id as JsonRpcId : null,
          ErrorCode.INVALID_REQUEST,
          "invalid request: method must be a string",
        );
      }
      if (hasId && !idOk) {
        return failure(
          null,
          ErrorCode.INVALID_REQUEST,
          "invalid request: id must be a string or a number",
        );
      }
      if (m.params !== undefined && (typeof m.params !== "object" || m.params === null)) {
        return hasId
          ? failure(
            m.id as JsonRpcId,
            ErrorCode.INVALID_REQUEST,
            "invalid request: params must be an object or an array",
          )
          : this.#dropNotification(m.method, ErrorCode.INVALID_REQUEST);
      }
      return hasId
        ? this.#serveRequest(m.id as JsonRpcId, m.method, m.params)
        : this.#serveNotification(m.method, m.params);
    }
    if ("result" in m || "error" in m) {
      this.#receiveResponse(m);
      return undefined;
    }
    return failure(
      idOk ? m.id as JsonRpcId : null,
      ErrorCode.INVALID_REQUEST,
      "invalid request: neither a request nor a response",
    );
  }

  /** Checks an incoming method against the contract, version, capabilities and gate. */
  #admission(
    method: string,
    kind: "request" | "notification",
    reply?: ReplyHooks,
  ): MethodSpec | ProtocolError {
    const spec = METHOD_SPECS.get(method);
    if (spec && spec.kind !== kind) {
      // A notification sent with an id, or a request without one: the envelope is wrong.
      return new ProtocolError(
        ErrorCode.INVALID_REQUEST,
        `invalid request: ${method} is a ${spec.kind}`,
      );
    }
    const served = kind === "request"
      ? this.#requestHandlers.has(method) || this.#shared?.request(method) !== undefined
      : this.#notificationHandlers.has(method) || this.#shared?.notification(method) !== undefined;
    if (!spec || !served) {
      return new ProtocolError(ErrorCode.METHOD_NOT_FOUND, "method not found", { method });
    }
    if (spec.since !== V1 && this.protocol === V1) {
      return new ProtocolError(ErrorCode.METHOD_NOT_FOUND, "method not found", {
        method,
        since: spec.since,
      });
    }
    const gate = this.admit?.(method, kind, reply) ??
      this.#shared?.admit?.(this.#owner, method, kind, reply);
    if (gate) return gate;
    if (spec.capability && !hasCapability(this.capabilities, spec.capability)) {
      return new ProtocolError(ErrorCode.CAPABILITY_MISSING, "capability missing", {
        reason: "capability_missing",
        capability: spec.capability,
      });
    }
    return spec;
  }

  #serveRequest(
    id: JsonRpcId,
    method: string,
    params: unknown,
  ): JsonRpcResponse | undefined | Promise<JsonRpcResponse | undefined> {
    const context = new IncomingRequest(id, method, this.#frameLength);
    const response = this.#respond(context, params);
    // Hooks follow the response: it is sent here, then they run. An answer still to come may
    // get a hook before it settles.
    if (response instanceof Promise) {
      return response.then((answer) => {
        if (!context.hooked) return answer;
        this.#send(answer);
        context.runHooks(this.#logger);
        return undefined;
      });
    }
    if (!context.hooked) return response;
    this.#send(response);
    context.runHooks(this.#logger);
    return undefined;
  }

  #respond(
    context: IncomingRequest,
    params: unknown,
  ): JsonRpcResponse | Promise<JsonRpcResponse> {
    const { id, method } = context;
    const spec = this.#admission(method, "request", context);
    if (spec instanceof ProtocolError) return failure(id, spec.code, spec.message, spec.data);
    if (Array.isArray(params)) {
      return failure(id, ErrorCode.INVALID_PARAMS, "invalid params: params are by name", {
        issues: [],
      });
    }
    const data = checked(spec.acceptsParams, spec.params, params ?? {});
    if (data instanceof Refused) {
      return failure(id, ErrorCode.INVALID_PARAMS, "invalid params", { issues: data.issues });
    }
    const handler = this.#requestHandlers.get(method) ?? this.#shared!.request(method)!;
    let result: unknown;
    try {
      result = handler(data, context, this.#owner);
    } catch (error) {
      return this.#failed(id, method, error);
    }
    if (!(result instanceof Promise)) return this.#answered(spec, id, method, result);
    // Only an answer still to come can see the connection end: a synchronous one has none.
    if (this.#inFlight === NO_REQUESTS) this.#inFlight = new Set();
    this.#inFlight.add(context);
    return result.then(
      (value) => {
        this.#inFlight.delete(context);
        return this.#answered(spec, id, method, value);
      },
      (error) => {
        this.#inFlight.delete(context);
        return this.#failed(id, method, error);
      },
    );
  }

  /** The response carrying a handler's result, once checked against the contract. */
  #answered(spec: MethodSpec, id: JsonRpcId, method: string, result: unknown): JsonRpcResponse {
    const verdict = checked(spec.acceptsResult!, spec.result!, result);
    if (verdict instanceof Refused) {
      this.#logger.error("handler returned a result outside the contract", {
        method,
        issues: verdict.issues,
      });
      return failure(id, ErrorCode.INTERNAL_ERROR, "internal error");
    }
    return { jsonrpc: "2.0", id, result };
  }

  /** The response to a handler that threw or rejected. */
  #failed(id: JsonRpcId, method: string, error: unknown): JsonRpcResponse {
    if (error instanceof ProtocolError) return failure(id, error.code, error.message, error.data);
    // The exception's text stays local: it may name paths or values the peer must not see.
    this.#logger.error("request handler failed", { method, error: describe(error) });
    return failure(id, ErrorCode.INTERNAL_ERROR, "internal error");
  }

  #serveNotification(method: string, params: unknown): undefined | Promise<undefined> {
    const spec = this.#admission(method, "notification");
    if (spec instanceof ProtocolError) return this.#dropNotification(method, spec.code);
    const data = Array.isArray(params)
      ? new Refused([])
      : checked(spec.acceptsParams, spec.params, params ?? {});
    if (data instanceof Refused) {
      this.#logger.warn("notification rejected", {
        method,
        code: ErrorCode.INVALID_PARAMS,
        issues: data.issues,
      });
      return undefined;
    }
    const failed = (error: unknown) => {
      this.#logger.error("notification handler failed", { method, error: describe(error) });
      return undefined;
    };
    try {
      const handler = this.#notificationHandlers.get(method) ??
        this.#shared!.notification(method)!;
      const done = handler(data, this.#owner);
      if (done instanceof Promise) return done.then(() => undefined, failed);
    } catch (error) {
      failed(error);
    }
    return undefined;
  }

  #dropNotification(method: string, code: number): undefined {
    this.#logger.warn("notification rejected", { method, code });
    return undefined;
  }

  #dropResponse(m: Record<string, unknown>, why: string): undefined {
    this.#logger.warn("malformed response dropped", { id: isJsonRpcId(m.id) ? m.id : null, why });
    return undefined;
  }

  #receiveResponse(m: Record<string, unknown>): void {
    const id = m.id;
    if (!isJsonRpcId(id)) {
      if (id === null && isErrorObject(m.error)) {
        // The peer could not read one of our frames (it had no id to answer to).
        this.#logger.warn("peer reported an error without an id", { code: m.error.code });
      } else this.#dropResponse(m, "response id is not a string or a number");
      return;
    }
    if (!this.#pending.has(id)) {
      if (this.#abandoned?.delete(id)) {
        this.#logger.debug("late response to an abandoned request", { id });
      } else this.#logger.warn("response to an unknown request id ignored", { id });
      return;
    }
    if ("error" in m) {
      if ("result" in m || !isErrorObject(m.error)) {
        this.#settle(
          id,
          undefined,
          new ProtocolError(ErrorCode.INTERNAL_ERROR, "malformed error response"),
        );
        return;
      }
      this.#settle(id, undefined, protocolErrorFromWire(m.error));
      return;
    }
    this.#settle(id, m.result);
  }

  #send(response: JsonRpcResponse): void {
    if (this.#direct) {
      if (this.#closeInfo) return;
      try {
        this.#direct.sendMessage(response);
      } catch (error) {
        this.#logger.debug("response not sent: transport closed", { error: describe(error) });
      }
      return;
    }
    let text = JSON.stringify(response);
    if (exceedsBytes(text, this.#maxFrameBytes)) {
      this.#logger.error("response over the frame size limit replaced by an error", {
        id: response.id,
      });
      text = JSON.stringify(
        failure(response.id, ErrorCode.INTERNAL_ERROR, "internal error", {
          reason: "result_too_large",
        }),
      );
    }
    this.#sendText(text);
  }

  #sendText(text: string): void {
    if (this.#closeInfo) return;
    try {
      this.#transport.send(text);
    } catch (error) {
      this.#logger.debug("response not sent: transport closed", { error: describe(error) });
      return;
    }
    this.#bound();
  }

  #shutdown(info: CloseInfo): void {
    if (this.#closeInfo) return;
    this.#closeInfo = info;
    if (this.#sweepTimer !== undefined) {
      this.#clock.clearTimeout(this.#sweepTimer);
      this.#sweepTimer = undefined;
    }
    for (const id of [...this.#pending.keys()]) {
      this.#settle(id, undefined, new ConnectionClosedError(info.code, info.reason));
    }
    for (const request of this.#inFlight) {
      request.abort(new ConnectionClosedError(info.code, info.reason));
    }
    this.#inFlight.clear();
  }
}

/**
 * The context of one incoming request. Its signal is created only when a handler reads it:
 * most handlers never do, and an AbortSignal is among the costliest objects a frame would
 * otherwise allocate.
 */
class IncomingRequest implements RequestContext {
  readonly id: JsonRpcId;
  readonly method: string;
  readonly frameLength: number;
  #controller: AbortController | undefined;
  #aborted = false;
  #reason: unknown;
  #hooks: (() => void)[] | undefined;

  constructor(id: JsonRpcId, method: string, frameLength: number) {
    this.id = id;
    this.method = method;
    this.frameLength = frameLength;
  }

  /** Whether a hook waits for the response. */
  get hooked(): boolean {
    return this.#hooks !== undefined;
  }

  afterReply(fn: () => void): void {
    (this.#hooks ??= []).push(fn);
  }

  /** Runs the hooks (the response was sent), each on its own: one failing stops none. */
  runHooks(logger: Logger): void {
    const hooks = this.#hooks!;
    this.#hooks = undefined;
    for (const hook of hooks) {
      try {
        hook();
      } catch (error) {
        logger.error("after-reply hook failed", { error: describe(error) });
      }
    }
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#aborted) this.#controller.abort(this.#reason);
    }
    return this.#controller.signal;
  }

  abort(reason: unknown): void {
    if (this.#aborted) return;
    this.#aborted = true;
    this.#reason = reason;
    this.#controller?.abort(reason);
  }
}

function failure(
  id: JsonRpcId | null,
  code: number,
  message: string,
  data?: unknown,
): JsonRpcFailure {
  return {
    jsonrpc: "2.0",
    id,
    error: data === undefined ? { code, message } : { code, message, data },
  };
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
