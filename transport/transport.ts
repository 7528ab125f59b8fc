/**
 * The transport contract: a message-oriented, text-frame channel with WebSocket close semantics.
 *
 * A transport knows nothing about JSON-RPC methods. Runtime adapters (WebSocket on Deno, Bun,
 * Node and Workers; Unix sockets; named pipes) and the in-memory pair all implement it, so the
 * protocol core runs unchanged on every runtime.
 */

/** How a connection ended: the WebSocket close code and reason seen by this side. */
export interface CloseInfo {
  /** WebSocket close code (1000, 1001, 1006 for an abnormal end, 4001–4005 for the protocol's own). */
  readonly code: number;
  /** Close reason text; empty when none was given. */
  readonly reason: string;
}

/** Receives what arrives on a transport. */
export interface TransportReceiver {
  /** One complete text frame. */
  (frame: string): void;
}

/** A bidirectional text-frame connection. */
export interface Transport {
  /** The negotiated WebSocket subprotocol, `""` when none was negotiated. */
  readonly protocol: string;
  /**
   * Queues one complete text frame for sending. Frames are never interleaved: each call sends
   * exactly one frame, in call order. Throws {@linkcode TransportClosedError} once closed.
   */
  send(frame: string): void;
  /**
   * Starts delivery of incoming frames to `receiver`. Frames that arrived before this call are
   * buffered and delivered first, in order. May be called once.
   */
  listen(receiver: TransportReceiver): void;
  /** Closes the connection with a WebSocket close code and reason (default 1000). Idempotent. */
  close(code?: number, reason?: string): void;
  /**
   * Ends the connection at once, discarding what is queued for the peer: no closing handshake,
   * whose close frame would wait behind a backlog a peer that reads nothing never takes (and
   * hold it meanwhile). `closed` settles with `code` and `reason`. Absent where the runtime
   * cannot; `close` is then the nearest. Idempotent.
   */
  abort?(code?: number, reason?: string): void;
  /** Settles when the connection has ended, with the code and reason this side observed. */
  readonly closed: Promise<CloseInfo>;
  /**
   * Bytes queued by `send` and not yet handed to the network (a WebSocket's `bufferedAmount`):
   * it grows while the other end reads slower than this end sends. Absent where the runtime
   * cannot tell; a {@linkcode Peer} then never counts the link as congested.
   */
  readonly bufferedAmount?: number;
}

/** Receives what arrives on a {@linkcode MessageTransport}: a message object, or a text frame. */
export interface MessageReceiver {
  (message: string | object): void;
}

/**
 * A transport between two ends in one process that hands messages over as objects, without
 * serializing them: a {@linkcode Peer} on it skips `JSON.stringify` and `JSON.parse` (and the
 * frame size limit, there being no frame). The objects are shared, not copied: neither end may
 * change a message after sending it or while handling it.
 */
export interface MessageTransport extends Transport {
  /** Queues one message object, in order with the text frames `send` queues. */
  sendMessage(message: object): void;
  /** Like {@linkcode Transport.listen}, for a receiver that takes message objects as well. */
  listenMessages(receiver: MessageReceiver): void;
}

/** Whether a transport hands over message objects ({@linkcode MessageTransport}). */
export function isMessageTransport(transport: Transport): transport is MessageTransport {
  const t = transport as Partial<MessageTransport>;
  return typeof t.sendMessage === "function" && typeof t.listenMessages === "function";
}

/** Thrown by {@linkcode Transport.send} after the transport has closed. */
export class TransportClosedError extends Error {
  /** The close code, when the transport knows it. */
  readonly code: number | undefined;
  /** The close code and reason, when known. */
  constructor(code?: number, reason?: string) {
    super(`transport closed${code === undefined ? "" : ` (${code}${reason ? ` ${reason}` : ""})`}`);
    this.name = "TransportClosedError";
    this.code = code;
  }
}

/** Close code for a connection that ended without a close frame (the WebSocket convention). */
export const ABNORMAL_CLOSURE = 1006;

/** Close codes RFC 6455 lets an endpoint put in a close frame (1005, 1006 and 1015 are reserved). */
const SENDABLE_STANDARD_CODES: ReadonlySet<number> = new Set([
  1000,
  1001,
  1002,
  1003,
  1007,
  1008,
  1009,
  1010,
  1011,
  1012,
  1013,
  1014,
]);

/**
 * Checks that a close code may appear in a close frame, so every transport refuses the same
 * codes: the sendable RFC 6455 codes and the application range 3000–4999.
 */
export function assertSendableCloseCode(code: number): void {
  if (
    !SENDABLE_STANDARD_CODES.has(code) && !(Number.isInteger(code) && code >= 3000 && code <= 4999)
  ) {
    throw new RangeError(`close code ${code} cannot be sent in a close frame`);
  }
}

const encoder = new TextEncoder();

/** Truncates a close reason to the 123-byte limit of a WebSocket close frame, on a char boundary. */
export function clampCloseReason(reason: string): string {
  if (reason.length <= 41) return reason; // 41 * 3 bytes still fits
  if (encoder.encode(reason).byteLength <= 123) return reason;
  let out = "";
  let bytes = 0;
  for (const ch of reason) {
    const size = encoder.encode(ch).byteLength;
    if (bytes + size > 123) break;
    out += ch;
    bytes += size;
  }
  return out;
}

/**
 * How long a close this end started waits for the other end's close frame before it drops the
 * socket: a peer that never answers would otherwise hold the connection (and, on a harness, its
 * slot among the connections not registered) for as long as the socket library waits (`ws`: 30 s).
 */
export const CLOSE_WAIT_MS = 2_000;

/**
 * What every socket adapter's {@linkcode Transport} does alike, written once (`websocket.ts`,
 * `node.ts`, `bun.ts` and `websocket-stream.ts` extend it): the frames that arrive before
 * `listen` are kept for the receiver it names (once), then handed straight to it; `closed`
 * settles once, with the first close seen; `close` checks the code and clamps the reason. The
 * adapter sends, closes its socket ({@linkcode closeSocket}) and feeds {@linkcode deliver} and
 * {@linkcode finish} from the socket's events. State is made when used: a harness holds
 * thousands of idle connections.
 */
export abstract class SocketTransport implements Transport {
  abstract readonly protocol: string;
  readonly closed: Promise<CloseInfo>;
  #receiver: TransportReceiver | undefined;
  /** Frames that arrived before `listen`. */
  #buffer: string[] | undefined;
  #closeInfo: CloseInfo | undefined;
  #resolveClosed!: (info: CloseInfo) => void;

  constructor() {
    this.closed = new Promise((resolve) => (this.#resolveClosed = resolve));
  }

  /** How the connection ended, once it has. */
  get closeInfo(): CloseInfo | undefined {
    return this.#closeInfo;
  }

  abstract send(frame: string): void;

  listen(receiver: TransportReceiver): void {
    if (this.#receiver) throw new Error("listen() may be called once");
    this.#receiver = receiver;
    const buffered = this.#buffer;
    this.#buffer = undefined;
    if (buffered) { for (const frame of buffered) receiver(frame); }
  }

  close(code = 1000, reason = ""): void {
    assertSendableCloseCode(code);
    if (!this.#closeInfo) this.closeSocket(code, clampCloseReason(reason));
  }

  abort(code = 1000, reason = ""): void {
    assertSendableCloseCode(code);
    if (this.#closeInfo) return;
    const clamped = clampCloseReason(reason);
    // Settled first: the socket's own close event (1006, no close frame) comes too late to say why.
    this.finish(code, clamped);
    this.abortSocket(code, clamped);
  }

  /** A whole frame from the socket: to the receiver, or kept until `listen` names one. */
  deliver(frame: string): void {
    const receiver = this.#receiver;
    if (receiver) receiver(frame);
    else (this.#buffer ??= []).push(frame);
  }

  /** The connection ended with `code` and `reason`: settles `closed`, unless it has settled. */
  finish(code: number, reason: string): void {
    if (this.#closeInfo) return;
    this.#closeInfo = { code, reason };
    this.#resolveClosed(this.#closeInfo);
  }

  /** The socket ended without a close frame (it broke, or never opened): 1006. */
  finishAbnormally(): void {
    this.finish(ABNORMAL_CLOSURE, "");
  }

  /** What `send` throws once the connection has ended (or is ending). */
  protected closedError(): TransportClosedError {
    return new TransportClosedError(this.#closeInfo?.code, this.#closeInfo?.reason);
  }

  /**
   * Closes the socket with a sendable `code` and a clamped `reason` (`close`, while the
   * connection has not ended).
   */
  protected abstract closeSocket(code: number, reason: string): void;

  /**
   * Drops the socket without a closing handshake, discarding what it holds (`abort`). By
   * default it closes it: an adapter whose socket can be dropped overrides this.
   */
  protected abortSocket(code: number, reason: string): void {
    this.closeSocket(code, reason);
  }
}

/** Opening a connection failed; `status` is the HTTP status when the server refused the upgrade. */
export class DialError extends Error {
  /** HTTP status of a refused upgrade (401, 403, 404, ...), if the server answered. */
  readonly status: number | undefined;
  /** What failed, the HTTP status of a refused upgrade, and the failure behind it as `cause`. */
  constructor(message: string, status?: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "DialError";
    this.status = status;
  }
}

/** Options for opening a client connection. */
export interface DialOptions {
  /** Subprotocols to offer, preferred first. */
  protocols?: string[];
  /** Extra handshake headers (e.g. `authorization`). Never logged. */
  headers?: Record<string, string>;
  /** Aborts the attempt. */
  signal?: AbortSignal;
  /** Frames over this many bytes close the connection with 1009. */
  maxFrameBytes?: number;
}

/** Opens a client connection to a URL (`ws://`, `wss://`, `unix:///path.sock`). */
export type Dialer = (url: string, options?: DialOptions) => Promise<Transport>;
