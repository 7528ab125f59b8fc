/**
 * A {@linkcode Transport} over any object with the WHATWG WebSocket interface: the global
 * `WebSocket` of Deno, Bun, browsers and Workers (including the server end of a `WebSocketPair`),
 * and the `ws` package's sockets on Node. One adapter, so close codes, reasons, subprotocol and
 * the frame limit behave the same on every runtime.
 */
import {
  CLOSE_WAIT_MS,
  DialError,
  type DialOptions,
  SocketTransport,
  type Transport,
} from "./transport.ts";
import { exceedsBytes } from "./bytes.ts";
import { redactUrls } from "../protocol/logger.ts";

/** The part of the WHATWG WebSocket interface the adapter uses. */
export interface WebSocketLike {
  /** The negotiated subprotocol. */
  readonly protocol: string;
  /** 0 connecting, 1 open, 2 closing, 3 closed. */
  readonly readyState: number;
  /** How binary frames arrive (set where supported). */
  binaryType?: string;
  /** Sends a text frame. */
  send(data: string): void;
  /** Bytes sent and not yet on the network, where the runtime tracks them. */
  readonly bufferedAmount?: number;
  /** Closes with a code and reason. */
  close(code?: number, reason?: string): void;
  /** Text frames. */
  addEventListener(type: "message", listener: (event: { data: unknown }) => void): void;
  /** The close, with its code and reason. */
  addEventListener(
    type: "close",
    listener: (event: { code: number; reason: string }) => void,
  ): void;
  /** A failure (a close follows). */
  addEventListener(type: "error", listener: (event: unknown) => void): void;
}

const OPEN = 1;
const decoder = new TextDecoder();

/** Options of {@linkcode webSocketTransport}. */
export interface WebSocketTransportOptions {
  /**
   * The negotiated subprotocol, when the socket object does not report it (Deno and Workers
   * servers report `""` even after negotiation).
   */
  protocol?: string;
  /**
   * Frames over this many UTF-8 bytes close the connection with 1009, for servers whose
   * runtime has no payload limit of its own (Deno).
   */
  maxFrameBytes?: number;
}

/** Wraps an open WebSocket as a {@linkcode Transport}. */
export function webSocketTransport(
  socket: WebSocketLike,
  options: WebSocketTransportOptions = {},
): Transport {
  return new WebSocketTransport(socket, options.protocol, options.maxFrameBytes);
}

class WebSocketTransport extends SocketTransport {
  readonly #protocol: string | undefined;
  readonly #socket: WebSocketLike;
  readonly #maxFrameBytes: number;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(socket: WebSocketLike, protocol: string | undefined, maxFrameBytes = Infinity) {
    super();
    this.#socket = socket;
    this.#protocol = protocol;
    this.#maxFrameBytes = maxFrameBytes;
    if ("binaryType" in socket) socket.binaryType = "arraybuffer";
    socket.addEventListener("message", (event) => this.#onMessage(event.data));
    socket.addEventListener("close", (event) => {
      if (this.#closeTimer !== undefined) clearTimeout(this.#closeTimer);
      this.finish(event.code || 1005, event.reason ?? "");
    });
    socket.addEventListener("error", () => {
      // An error is followed by a close event on a conforming socket; a socket that never
      // opened, or dies without one, still ends here.
      if (socket.readyState === 3) this.finishAbnormally();
    });
    if (socket.readyState > OPEN) this.finishAbnormally();
  }

  /** Read from the socket unless given: a client socket knows it only once open. */
  get protocol(): string {
    return this.#protocol ?? this.#socket.protocol;
  }

  get bufferedAmount(): number | undefined {
    return this.#socket.bufferedAmount;
  }

  send(frame: string): void {
    if (this.closeInfo || this.#socket.readyState !== OPEN) throw this.closedError();
    this.#socket.send(frame);
  }

  protected closeSocket(code: number, reason: string): void {
    try {
      this.#socket.close(code, reason);
    } catch {
      // A client-side WHATWG socket refuses codes outside 1000/3000-4999: close normally then.
      this.#socket.close(1000, reason);
    }
    // A WHATWG socket cannot be dropped, and Deno's server end waits for the peer's close frame
    // without end: a peer that never answers ends the connection here all the same (1006), so
    // that nothing waits on it, nor counts it among the connections still open.
    this.#closeTimer ??= setTimeout(() => this.finishAbnormally(), CLOSE_WAIT_MS);
  }

  #onMessage(data: unknown): void {
    let frame: string;
    if (typeof data === "string") frame = data;
    else if (data instanceof ArrayBuffer) frame = decoder.decode(data);
    else if (ArrayBuffer.isView(data)) frame = decoder.decode(data);
    else if (Array.isArray(data)) frame = data.map((part) => decoder.decode(part)).join("");
    else return;
    if (exceedsBytes(frame, this.#maxFrameBytes)) {
      this.close(1009, "frame too large");
      return;
    }
    this.deliver(frame);
  }
}

/**
 * Opens a connection with the runtime's global `WebSocket`, passing handshake headers in the
 * options bag that Deno and Bun accept (`new WebSocket(url, { protocols, headers })`). Resolves
 * once open; a refused upgrade rejects with {@linkcode DialError} carrying the HTTP status when
 * the runtime reports it in the error message.
 */
export function dialNativeWebSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new DialError("dial aborted", undefined, { cause: options.signal.reason }));
      return;
    }
    const Native = globalThis.WebSocket as unknown as new (
      url: string,
      options: {
        protocols?: string[];
        headers?: Record<string, string>;
        perMessageDeflate?: boolean;
      },
    ) => WebSocketLike & { addEventListener(type: "open", listener: () => void): void };
    let socket: InstanceType<typeof Native>;
    try {
      socket = new Native(url, {
        protocols: options.protocols,
        headers: options.headers,
        // No `permessage-deflate` offer (Bun's client makes one unless told not to; Deno's
        // makes none), as the byte-stream clients make none: a server that takes it (workerd
        // does) keeps a zlib context per connection at each end (measured in
        // docs/benchmarks.md), and a token compressed in one window with a peer's data can be
        // read from the frames' lengths (CRIME).
        perMessageDeflate: false,
      });
    } catch (error) {
      reject(new DialError("cannot dial", undefined, { cause: error }));
      return;
    }
    const transport = webSocketTransport(socket);
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener("abort", onAbort);
      outcome();
    };
    const onAbort = () =>
      settle(() => {
        socket.close();
        reject(new DialError("dial aborted", undefined, { cause: options.signal?.reason }));
      });
    options.signal?.addEventListener("abort", onAbort, { once: true });
    socket.addEventListener("open", () => settle(() => resolve(transport)));
    socket.addEventListener("error", (event) =>
      settle(() => {
        const message = (event as { message?: string }).message ?? "";
        const status = /status(?: code)?\D{0,3}([1-5]\d\d)\b/i.exec(message)?.[1];
        // The runtime's reason ("TLS handshake failed: unable to verify the first certificate")
        // is the cause; its message names the URL, whose credentials and query are hidden.
        reject(
          new DialError(
            "cannot connect",
            status ? Number(status) : undefined,
            message ? { cause: new Error(redactUrls(message)) } : undefined,
          ),
        );
      }));
  });
}
