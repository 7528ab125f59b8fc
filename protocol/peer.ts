/**
 * One end of a JSON-RPC 2.0 connection speaking the contract: it validates every incoming
 * request against the contract before its handler runs, correlates responses, gates methods by
 * protocol version and capability, and ends every pending request exactly once.
 *
 * It knows nothing about sockets: it reads and writes text frames through a {@linkcode Transport}.
 *
 * Its parts: the types its users write against (`peer-types.ts`), the handler table shared by
 * many peers (`peer-handlers.ts`), the checks against the contract (`contract-check.ts`), and
 * the requests in flight (`peer-requests.ts`: those awaiting their response, and the context of
 * one being served). This module is the connection itself: what goes out, what comes in, and
 * the end.
 */
import {
  type CloseInfo,
  isMessageTransport,
  type MessageTransport,
  type Transport,
  TransportClosedError,
} from "../transport/transport.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "../transport/bytes.ts";
import type { UnsentEntry } from "../transport/unsent-budget.ts";
import { dropUnread, PeerHolder } from "./peer-backlog.ts";
import { hasCapability } from "./capabilities.ts";
import { type Clock, systemClock } from "./clock.ts";
import { checked, Refused, requireSpec } from "./contract-check.ts";
import { echoed } from "./issues.ts";
import {
  CapabilityNotAdvertisedError,
  ConnectionClosedError,
  describeError,
  FrameTooLargeError,
  InvalidCallOptionError,
  InvalidOutgoingParamsError,
  InvalidResultError,
  LocalError,
  MethodUnavailableError,
  ProtocolError,
  RequestAbortedError,
} from "./errors.ts";
import { checkSignal } from "./abort.ts";
import { checkTimeoutOption } from "./timeout-option.ts";
import {
  METHOD_SPECS,
  type MethodSpec,
  type NotificationMap,
  type NotificationMethod,
  type RequestMap,
  type RequestMethod,
} from "./generated/contract.ts";
import { ErrorCode, protocolErrorFromWire } from "./generated/errors.ts";
import {
  BROKEN_NOTIFICATION,
  BROKEN_RESPONSE,
  envelopeFault,
  shallowEnvelope,
} from "./envelope.ts";
import {
  DEFAULT_MAX_DEPTH,
  exceedsBytes,
  exceedsDepth,
  failure,
  isErrorObject,
  isJsonRpcId,
  type JsonRpcId,
  type JsonRpcResponse,
} from "./jsonrpc.ts";
import { type Logger, silentLogger } from "./logger.ts";
import type { PeerHandlers } from "./peer-handlers.ts";
import type {
  AdmissionGate,
  AnyNotificationHandler,
  AnyRequestHandler,
  CallOptions,
  Disposable,
  NotificationHandler,
  PeerOptions,
  ReplyHooks,
  RequestHandler,
} from "./peer-types.ts";
import { IncomingRequest, PendingRequests } from "./peer-requests.ts";

export { DEFAULT_MAX_FRAME_BYTES } from "../transport/bytes.ts";
export { DEFAULT_MAX_DEPTH } from "./jsonrpc.ts";
export { PeerHandlers } from "./peer-handlers.ts";
export type { ValidationIssue } from "./contract-check.ts";
export type {
  AdmissionGate,
  CallOptions,
  Disposable,
  HandlerTable,
  NotificationHandler,
  PeerOptions,
  ReplyHooks,
  RequestContext,
  RequestHandler,
  SharedNotificationHandler,
  SharedRequestHandler,
} from "./peer-types.ts";

/** The default time a request waits for its response: 60 s. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/** Unsent bytes past which a connection is closed: 64 MiB ({@linkcode PeerOptions.maxQueuedBytes}). */
export const DEFAULT_MAX_QUEUED_BYTES = 64 * 1024 * 1024;

/** Unsent bytes past which a link counts as congested: 1 MiB ({@linkcode PeerOptions.maxBufferedBytes}). */
export const DEFAULT_MAX_BUFFERED_BYTES = 1024 * 1024;
/** WebSocket close code for a frame over the size limit. */
const MESSAGE_TOO_BIG = 1009;
const V1 = "bma.executor.v1";

// Shared empty collections of peers that have not written theirs yet: never written themselves.
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
  readonly #maxSendBytes: number;
  /** The length (UTF-16 code units) of the longest text frame sent. */
  #longestSent = 0;
  /** This side closed the connection for a frame over `maxFrameBytes` it received. */
  #refusedLargeFrame = false;
  readonly #maxBufferedBytes: number;
  readonly #maxQueuedBytes: number;
  /** Its place in the server's budget of unsent bytes, if it has one. */
  readonly #unsent: UnsentEntry | undefined;
  #dropped = 0;
  readonly #maxDepth: number;
  readonly #timeoutMs: number;
  readonly #validateOutgoing: boolean;
  // The table of requests is made on the first call, and the maps and the set below start as
  // shared empty ones, never written, made on the first write: a server holds a peer per idle
  // connection, where even empty Maps add up.
  #requests: PendingRequests | undefined;
  #requestHandlers: Map<string, AnyRequestHandler> = NO_HANDLERS;
  #notificationHandlers: Map<string, AnyNotificationHandler> = NO_HANDLERS;
  #inFlight: Set<IncomingRequest> = NO_REQUESTS;
  /** Handlers shared with other peers, and what they receive as owner. */
  readonly #shared: PeerHandlers<unknown> | undefined;
  readonly #owner: unknown;
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
    this.#maxSendBytes = options.maxSendBytes ?? this.#maxFrameBytes;
    this.#maxBufferedBytes = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    this.#maxQueuedBytes = options.maxQueuedBytes ?? DEFAULT_MAX_QUEUED_BYTES;
    this.#maxDepth = options.maxFrameDepth ?? DEFAULT_MAX_DEPTH;
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.#validateOutgoing = options.validateOutgoing ?? true;
    this.capabilities = options.capabilities;
    this.#shared = options.handlers as PeerHandlers<unknown> | undefined;
    this.#owner = options.owner;
    this.#unsent = options.unsentBudget && transport.bufferedAmount !== undefined
      ? options.unsentBudget.track(new PeerHolder(transport, this.#logger))
      : undefined;
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

  /**
   * The length, in UTF-16 code units, of the longest text frame this peer sent or tried to
   * send: after the other side closed with 1009, an upper bound of the frame it refused.
   */
  get longestSentFrame(): number {
    return this.#longestSent;
  }

  /** Whether this side closed the connection (1009) for a frame over `maxFrameBytes`. */
  get refusedLargeFrame(): boolean {
    return this.#refusedLargeFrame;
  }

  /** Refuses an outgoing frame over `maxSendBytes`, and remembers the longest. */
  #checkSend(frame: string): void {
    if (frame.length > this.#longestSent) this.#longestSent = frame.length;
    if (exceedsBytes(frame, this.#maxSendBytes)) {
      throw new FrameTooLargeError(frame.length, this.#maxSendBytes);
    }
  }

  /** How many outgoing requests await their response. */
  get pendingRequests(): number {
    return this.#requests?.size ?? 0;
  }

  /** Serves a request method. Registering a method again replaces its handler. */
  onRequest<M extends RequestMethod>(method: M, handler: RequestHandler<M>): Disposable {
    requireSpec(method, "request");
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
    requireSpec(method, "notification");
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
      if (signal !== undefined) {
        checkSignal(signal, method);
        if (signal.aborted) throw new RequestAbortedError(method, signal.reason);
      }
      if (options.timeoutMs !== undefined) checkTimeoutOption(options.timeoutMs, method);
      if (options.onLateResult !== undefined && typeof options.onLateResult !== "function") {
        throw new InvalidCallOptionError(method, "onLateResult", "is not a function");
      }
      const id = options.id ?? this.#nextId++;
      if (this.#requests?.has(id)) {
        throw new LocalError(`request id ${JSON.stringify(id)} is in use`);
      }
      const message = { jsonrpc: "2.0", id, method, params };
      const frame = this.#direct ? undefined : JSON.stringify(message);
      if (frame !== undefined) this.#checkSend(frame);
      const requests = this.#requests ??= new PendingRequests(this.#clock, this.#timeoutMs);
      requests.add(
        id,
        method,
        spec,
        resolve as (value: unknown) => void,
        reject,
        options.timeoutMs ?? this.#timeoutMs,
        signal,
        options.onLateResult,
      );
      try {
        if (frame === undefined) this.#direct!.sendMessage(message);
        else {
          this.#transport.send(frame);
          this.#bound();
        }
      } catch (error) {
        // A closed transport has settled `closed`: the shutdown rejects this request with the
        // close code. Anything else is this request's own failure.
        if (!(error instanceof TransportClosedError)) requests.settle(id, undefined, error);
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
    if (frame !== undefined) this.#checkSend(frame);
    try {
      if (frame === undefined) this.#direct!.sendMessage(message);
      else this.#transport.send(frame);
    } catch {
      throw this.#closedError();
    }
    if (frame !== undefined) this.#bound();
    return true;
  }

  /** Ends a connection holding more than `maxQueuedBytes` unsent; reports it to the budget. */
  #bound(): void {
    const queued = this.#transport.bufferedAmount;
    if (queued === undefined) return;
    this.#unsent?.update(queued);
    if (queued <= this.#maxQueuedBytes || this.#closeInfo) return;
    this.#logger.warn("peer reads nothing: closing the connection", {
      unsent_bytes: queued,
      max_queued_bytes: this.#maxQueuedBytes,
    });
    dropUnread(this.#transport, "the peer reads nothing: unsent backlog");
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

  #outgoingSpec(
    method: string,
    kind: "request" | "notification",
    params: unknown,
    validate: boolean,
  ): MethodSpec {
    if (this.#closeInfo) throw this.#closedError();
    const spec = requireSpec(method, kind);
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

  // ---- incoming ------------------------------------------------------------------------------

  /** One text frame, or one message object from a {@linkcode MessageTransport}. */
  #receive(frame: string | object): void {
    if (this.#closeInfo) return;
    let message: unknown = frame;
    if (typeof frame === "string") {
      if (exceedsBytes(frame, this.#maxFrameBytes)) {
        this.#refusedLargeFrame = true;
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
    const m = shallowEnvelope(frame, limit);
    const id = m && isJsonRpcId(m.id) ? m.id : null;
    if (m && !("method" in m) && ("result" in m || "error" in m)) {
      const method = id === null ? undefined : this.#requests?.method(id);
      this.#logger.warn("response nested too deep refused", { id, limit });
      this.#refused(ErrorCode.INVALID_REQUEST);
      if (method !== undefined) {
        this.#requests!.settle(
          id!,
          undefined,
          new InvalidResultError(method, [
            { path: [], message: `nested deeper than ${limit} levels`, code: "too_deep" },
          ]),
        );
      }
      return;
    }
    if (m && typeof m.method === "string" && !("id" in m)) {
      this.#logger.warn("notification nested too deep dropped", {
        method: echoed(m.method),
        limit,
      });
      this.#refused(ErrorCode.INVALID_REQUEST);
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
    const fault = envelopeFault(message);
    const m = message as Record<string, unknown>;
    if (fault === undefined) {
      if (!("method" in m)) {
        this.#receiveResponse(m);
        return undefined;
      }
      return "id" in m
        ? this.#serveRequest(m.id as JsonRpcId, m.method as string, m.params)
        : this.#serveNotification(m.method as string, m.params);
    }
    if (fault === BROKEN_RESPONSE) return this.#dropResponse(m, "jsonrpc is not 2.0");
    if (fault === BROKEN_NOTIFICATION) {
      return this.#dropNotification(m.method as string, ErrorCode.INVALID_REQUEST);
    }
    return fault;
  }

  /** Checks an incoming method against the contract, version, capabilities and gate. */
  #admission(
    method: string,
    kind: "request" | "notification",
    reply?: ReplyHooks,
  ): MethodSpec | ProtocolError {
    const spec = METHOD_SPECS.get(method);
    if (spec && spec.kind !== kind) {
      // A notification-kind method sent with an id names no request method (the contract's
      // MethodNotFound); a request sent without an id is a notification, never answered.
      return kind === "request"
        ? new ProtocolError(ErrorCode.METHOD_NOT_FOUND, "method not found", {
          method: echoed(method),
        })
        : new ProtocolError(ErrorCode.INVALID_REQUEST, `invalid request: ${method} is a request`);
    }
    const served = this.#serves(method, kind);
    if (!spec || !served) {
      // A gated method this end would receive but did not advertise is a missing capability
      // (the contract's CapabilityMissing), not an unknown method.
      if (
        spec?.capability && !hasCapability(this.capabilities, spec.capability) &&
        this.#receives(spec.direction)
      ) {
        return new ProtocolError(ErrorCode.CAPABILITY_MISSING, "capability missing", {
          reason: "capability_missing",
          capability: spec.capability,
        });
      }
      return new ProtocolError(ErrorCode.METHOD_NOT_FOUND, "method not found", {
        method: echoed(method),
      });
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

  #serves(method: string, kind: "request" | "notification"): boolean {
    return kind === "request"
      ? this.#requestHandlers.has(method) || this.#shared?.request(method) !== undefined
      : this.#notificationHandlers.has(method) || this.#shared?.notification(method) !== undefined;
  }

  /**
   * Whether this end receives methods sent in `direction`: it serves one of them. (A peer is
   * not told its role; what it serves says it.) Asked only on the way to a refusal.
   */
  #receives(direction: MethodSpec["direction"]): boolean {
    if (direction === "both") return true;
    for (const spec of METHOD_SPECS.values()) {
      if (spec.direction === direction && this.#serves(spec.name, spec.kind)) return true;
    }
    return false;
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
      return failure(
        id,
        ErrorCode.INVALID_PARAMS,
        "invalid params: params are by name",
        new Refused([]).data,
      );
    }
    const data = checked(spec.acceptsParams, spec.params, params ?? {});
    if (data instanceof Refused) {
      return failure(id, ErrorCode.INVALID_PARAMS, "invalid params", data.data);
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
    this.#logger.error("request handler failed", { method, error: describeError(error) });
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
      this.#refused(ErrorCode.INVALID_PARAMS);
      return undefined;
    }
    const failed = (error: unknown) => {
      this.#logger.error("notification handler failed", { method, error: describeError(error) });
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
    this.#logger.warn("notification rejected", { method: echoed(method), code });
    this.#refused(code);
    return undefined;
  }

  #dropResponse(m: Record<string, unknown>, why: string): undefined {
    this.#logger.warn("malformed response dropped", { id: isJsonRpcId(m.id) ? m.id : null, why });
    this.#refused(ErrorCode.INVALID_REQUEST);
    return undefined;
  }

  /** Tells the shared table of a refusal (see {@linkcode PeerHandlers.refused}). */
  #refused(code: number): void {
    const refused = this.#shared?.refused;
    if (refused !== undefined) refused(this.#owner, code);
  }

  /** Hands a late result to its request's {@linkcode CallOptions.onLateResult}. */
  #lateResult(requests: PendingRequests, id: JsonRpcId, result: unknown): void {
    const late = requests.lateResult(id, result);
    if (late === undefined) return;
    try {
      late.handler(late.result);
    } catch (error) {
      this.#logger.error("late-result handler failed", { id, error: describeError(error) });
    }
  }

  #receiveResponse(m: Record<string, unknown>): void {
    const id = m.id;
    if (!isJsonRpcId(id)) {
      if (id === null && isErrorObject(m.error)) {
        // The peer could not read one of our frames (it had no id to answer to).
        this.#logger.warn("peer reported an error without an id", { code: m.error.code });
        this.#refused(ErrorCode.INVALID_REQUEST);
      } else this.#dropResponse(m, "response id is not a string or a number");
      return;
    }
    const requests = this.#requests;
    if (!requests?.has(id)) {
      if (requests?.abandoned(id)) {
        this.#logger.debug("late response to an abandoned request", { id });
        if (!("error" in m)) this.#lateResult(requests, id, m.result);
      } else {
        this.#logger.warn("response to an unknown request id ignored", { id });
        this.#refused(ErrorCode.INVALID_REQUEST);
      }
      return;
    }
    if ("error" in m) {
      if ("result" in m || !isErrorObject(m.error)) {
        requests.settle(
          id,
          undefined,
          new ProtocolError(ErrorCode.INTERNAL_ERROR, "malformed error response"),
        );
        return;
      }
      requests.settle(id, undefined, protocolErrorFromWire(m.error));
      return;
    }
    requests.settle(id, m.result);
  }

  #send(response: JsonRpcResponse): void {
    if (this.#direct) this.#deliver(response);
    else {
      let text = JSON.stringify(response);
      if (text.length > this.#longestSent) this.#longestSent = text.length;
      if (exceedsBytes(text, this.#maxSendBytes)) {
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
    // Told once it is on its way: a server may close the connection for it.
    const error = (response as { error?: { code: number } }).error;
    if (error !== undefined) this.#refused(error.code);
  }

  #sendText(text: string): void {
    if (this.#deliver(text)) this.#bound();
  }

  /**
   * Hands a response to the transport (its text) or to a direct link (the message itself)
   * unless the connection closed; returns whether it went (a transport closing meanwhile throws).
   */
  #deliver(response: string | JsonRpcResponse): boolean {
    if (this.#closeInfo) return false;
    try {
      if (typeof response === "string") this.#transport.send(response);
      else this.#direct!.sendMessage(response);
      return true;
    } catch (error) {
      this.#logger.debug("response not sent: transport closed", { error: describeError(error) });
      return false;
    }
  }

  #shutdown(info: CloseInfo): void {
    if (this.#closeInfo) return;
    this.#closeInfo = info;
    this.#unsent?.release();
    this.#requests?.end(info.code, info.reason);
    for (const request of this.#inFlight) {
      request.abort(new ConnectionClosedError(info.code, info.reason));
    }
    this.#inFlight.clear();
  }
}
