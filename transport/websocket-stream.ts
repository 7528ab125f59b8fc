/**
 * A WebSocket client over a plain byte stream (TCP or a Unix socket), RFC 6455 framing in a few
 * hundred lines, with the runtime's socket injected (`websocket-stream.node.ts` over `node:net`,
 * `websocket-stream.bun.ts` over `Bun.connect`). It exists for one reason: the frames of one
 * event-loop turn go out in one write. Bun's own client `WebSocket` writes every frame with its
 * own syscall and `ws` runs each frame through two stream writes and its own event machinery, so
 * an executor's tool-call ack and result cost more and can wake the harness twice.
 *
 * `wss://` is left to each runtime's TLS-capable client (the adapters choose).
 */
import {
  ABNORMAL_CLOSURE,
  CLOSE_WAIT_MS,
  DialError,
  type DialOptions,
  SocketTransport,
  type Transport,
} from "./transport.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./bytes.ts";
import { isLocalSocketUrl, localSocketPath } from "./server.ts";

/** Where to connect: TCP, or a Unix socket (or Windows named pipe) path. */
export type ByteSocketTarget = { hostname: string; port: number } | { path: string };

/** An open byte stream, as a runtime adapter hands it over. */
export interface ByteSocket {
  /**
   * Writes `length` bytes of `data` from `offset`; returns how many the socket took (the rest is
   * offered again after `drain`; the caller copies it). `data` is a buffer from `allocate`
   * (or one the caller made and never writes to again): an adapter whose `allocate` hands out
   * the same buffer again must not keep `data` past the call.
   */
  write(data: Uint8Array, offset: number, length: number): number;
  /** Bytes the socket took and keeps, not yet written (an adapter that keeps none omits it). */
  readonly bufferedAmount?: number;
  /** Ends the stream. */
  end(): void;
  /** A buffer of `size` bytes or more to gather a turn's frames in (default: a Uint8Array). */
  allocate?(size: number): Uint8Array;
  /** Schedules the write of a turn's frames (default: `setImmediate`, else `setTimeout` 0). */
  afterTurn?(fn: () => void): void;
}

/** What a runtime adapter reports about the stream it opened. */
export interface ByteSocketEvents {
  /** Connected. */
  open(socket: ByteSocket): void;
  /** Bytes arrived; `chunk` may be reused after the call. */
  data(chunk: Uint8Array): void;
  /** The socket takes writes again after a short one. */
  drain(): void;
  /** The stream ended (after an error too). */
  close(): void;
  /** The stream failed (a connect failure included). */
  error(error: unknown): void;
}

/** Opens a byte stream to `target` and reports on it through `events`. */
export type ConnectByteSocket = (target: ByteSocketTarget, events: ByteSocketEvents) => void;

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** The most header bytes a handshake answer may have. */
const MAX_HANDSHAKE_BYTES = 16 * 1024;

/** Random bytes for frame masks, drawn a page at a time (one `getRandomValues` per frame costs). */
const maskPool = new Uint8Array(4096);
let maskAt = maskPool.length;
/** The smallest turn buffer (frames of a turn are gathered in one, made when the turn sends). */
const OUT_MIN_BYTES = 1024;
/**
 * A ping is answered only while less than this waits unsent: a peer that pings and reads
 * nothing would otherwise hold a pong of ours per ping (RFC 6455 5.5.3 lets an endpoint answer
 * only the latest ping). Data frames have the peer's own budget (`maxQueuedBytes`).
 */
const PONG_BACKLOG_BYTES = 1024 * 1024;
const NO_BYTES = new Uint8Array(0);

const encoder = new TextEncoder();
const strictDecoder = new TextDecoder("utf-8", { fatal: true });
const looseDecoder = new TextDecoder();

/** Whether {@linkcode dialByteWebSocket} can open `url` (`ws://` or a local socket, not `wss://`). */
export function canDialByteWebSocket(url: string): boolean {
  return isLocalSocketUrl(url) || url.startsWith("ws://");
}

/** Opens a WebSocket over a byte stream `connect` opens: `ws://host:port/path` or `unix:///path.sock`. */
export async function dialByteWebSocket(
  url: string,
  options: DialOptions,
  connect: ConnectByteSocket,
): Promise<Transport> {
  const signal = options.signal;
  if (signal?.aborted) throw new DialError("dial aborted", undefined, { cause: signal.reason });
  let target: ByteSocketTarget;
  let host: string;
  let path: string;
  if (isLocalSocketUrl(url)) {
    target = { path: localSocketPath(url) };
    host = "localhost";
    path = "/";
  } else {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch (error) {
      throw new DialError("cannot dial: not a URL", undefined, { cause: error });
    }
    if (parsed.protocol !== "ws:") throw new DialError(`cannot dial ${parsed.protocol} here`);
    const hostname = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
    target = { hostname, port: Number(parsed.port || 80) };
    host = parsed.host;
    path = `${parsed.pathname || "/"}${parsed.search}`;
  }
  const keyBytes = crypto.getRandomValues(new Uint8Array(16));
  const key = btoa(String.fromCharCode(...keyBytes));
  const accept = btoa(
    String.fromCharCode(
      ...new Uint8Array(await crypto.subtle.digest("SHA-1", encoder.encode(key + GUID))),
    ),
  );
  const protocols = options.protocols ?? [];
  const lines = [
    `GET ${path} HTTP/1.1`,
    `Host: ${host}`,
    "Upgrade: websocket",
    "Connection: Upgrade",
    `Sec-WebSocket-Key: ${key}`,
    "Sec-WebSocket-Version: 13",
  ];
  if (protocols.length) lines.push(`Sec-WebSocket-Protocol: ${protocols.join(", ")}`);
  for (const [name, value] of Object.entries(options.headers ?? {})) {
    if (/[\r\n:]/.test(name) || /[\r\n]/.test(value)) {
      throw new DialError("cannot dial: a handshake header has a line break");
    }
    lines.push(`${name}: ${value}`);
  }
  const request = `${lines.join("\r\n")}\r\n\r\n`;
  const maxFrameBytes = (options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES) + 1024;

  return await new Promise<Transport>((resolve, reject) => {
    let transport: ByteStreamTransport | undefined;
    let head = new Uint8Array(0);
    let settled = false;
    let socketRef: ByteSocket | undefined;
    const fail = (error: DialError) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      socketRef?.end();
      reject(error);
    };
    const onAbort = () => fail(new DialError("dial aborted", undefined, { cause: signal?.reason }));
    signal?.addEventListener("abort", onAbort, { once: true });
    const handshake = (chunk: Uint8Array) => {
      const joined = new Uint8Array(head.length + chunk.length);
      joined.set(head);
      joined.set(chunk, head.length);
      head = joined;
      const end = indexOfHeaderEnd(head);
      if (end < 0) {
        if (head.length > MAX_HANDSHAKE_BYTES) fail(new DialError("handshake answer too long"));
        return;
      }
      const text = looseDecoder.decode(head.subarray(0, end));
      const [statusLine, ...headerLines] = text.split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
      if (status !== 101) {
        fail(new DialError(`upgrade refused with HTTP ${status || "?"}`, status || undefined));
        return;
      }
      const headers = new Map<string, string>();
      for (const line of headerLines) {
        const colon = line.indexOf(":");
        if (colon > 0) {
          headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
        }
      }
      if (
        headers.get("upgrade")?.toLowerCase() !== "websocket" ||
        headers.get("sec-websocket-accept") !== accept
      ) {
        fail(new DialError("cannot connect: not a WebSocket handshake answer"));
        return;
      }
      const chosen = headers.get("sec-websocket-protocol") ?? "";
      if (chosen && !protocols.includes(chosen)) {
        fail(new DialError(`cannot connect: the server chose ${chosen}, which was not offered`));
        return;
      }
      if (headers.has("sec-websocket-extensions")) {
        fail(new DialError("cannot connect: the server chose an extension, none was offered"));
        return;
      }
      settled = true;
      signal?.removeEventListener("abort", onAbort);
      transport = new ByteStreamTransport(socketRef!, chosen, maxFrameBytes);
      resolve(transport);
      const rest = head.subarray(end + 4);
      if (rest.length) transport.receive(rest);
    };
    connect(target, {
      open(socket) {
        socketRef = socket;
        if (settled) {
          socket.end();
          return;
        }
        const bytes = encoder.encode(request);
        socket.write(bytes, 0, bytes.length);
      },
      data(chunk) {
        if (transport) transport.receive(chunk);
        else handshake(chunk);
      },
      drain() {
        transport?.drain();
      },
      close() {
        if (transport) transport.socketClosed();
        else fail(new DialError("cannot connect: closed during the handshake"));
      },
      error(error) {
        if (transport) transport.socketClosed();
        else fail(new DialError("cannot connect", undefined, { cause: error }));
      },
    });
  });
}

function indexOfHeaderEnd(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

/**
 * Runs `fn` once the current turn is over (its microtasks and the other events read with it):
 * what one turn sends is then written at once. A microtask can be too early: a handler's answer
 * and the request its continuation sends a few promise steps later would leave in two writes.
 */
const afterTurn: (fn: () => void) => void = (() => {
  const immediate = (globalThis as { setImmediate?: (fn: () => void) => unknown }).setImmediate;
  return typeof immediate === "function"
    ? (fn) => void immediate(fn)
    : (fn) => void setTimeout(fn, 0);
})();

/** Close codes a peer may send (RFC 6455 7.4): 1000–1003, 1007–1014, 3000–4999. */
function isReceivableCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
}

/**
 * A client WebSocket connection over a byte stream, after the handshake: it masks what it sends
 * and refuses masked frames. State is made when used.
 */
class ByteStreamTransport extends SocketTransport {
  readonly protocol: string;
  readonly #socket: ByteSocket;
  readonly #maxFrameBytes: number;
  /** A close frame was sent (by `close`, or in answer to the server's). */
  #closeSent = false;
  #closeTimer: ReturnType<typeof setTimeout> | undefined;
  /** Frames of this turn, written together at its end: `#out[0, #outLength)`. */
  #out: Uint8Array = NO_BYTES;
  #outLength = 0;
  #flushScheduled = false;
  /** What the socket did not take yet (written on `drain`). */
  #backlog: Uint8Array | undefined;
  /** Received bytes not yet parsed into a whole frame: `#input[0, #inputLength)`. */
  #input: Uint8Array = NO_BYTES;
  #inputLength = 0;
  /** The size of the frame `#input` starts with, once its header is in (else 0). */
  #inputFrameBytes = 0;
  /** Fragments of a message in progress, and its opcode. */
  #fragments: Uint8Array[] | undefined;
  #fragmentBytes = 0;
  #fragmentOpcode = 0;

  constructor(socket: ByteSocket, protocol: string, maxFrameBytes: number) {
    super();
    this.#socket = socket;
    this.protocol = protocol;
    this.#maxFrameBytes = maxFrameBytes;
  }

  /** Frames of this turn not yet written, and what the socket has not taken. */
  get bufferedAmount(): number {
    return this.#outLength + (this.#backlog?.byteLength ?? 0) + (this.#socket.bufferedAmount ?? 0);
  }

  send(frame: string): void {
    if (this.closeInfo || this.#closeSent) throw this.closedError();
    this.#queue(1, encoder.encode(frame));
  }

  protected closeSocket(code: number, reason: string): void {
    if (this.#closeSent) return;
    this.#sendClose(code, reason);
    // The other end answers with its close frame; one that never does is dropped.
    this.#closeTimer = setTimeout(() => this.#end(ABNORMAL_CLOSURE, ""), CLOSE_WAIT_MS);
  }

  /** Bytes from the socket. */
  receive(chunk: Uint8Array): void {
    if (this.closeInfo) return;
    let from = 0;
    if (this.#inputLength) {
      // Appended in place, into a buffer made for the whole frame once its header is in (else
      // grown by doubling), and only up to that frame's end: a large frame arrives in hundreds
      // of socket reads, and copying what came before at each read was quadratic (a 15 MB frame
      // took seconds, and the heartbeat answers queued behind it came too late).
      const frameBytes = this.#inputFrameBytes;
      from = frameBytes ? Math.min(chunk.length, frameBytes - this.#inputLength) : chunk.length;
      const end = this.#inputLength + from;
      if (end > this.#input.length) {
        const grown = new Uint8Array(Math.max(end, frameBytes || this.#input.length * 2));
        grown.set(this.#input.subarray(0, this.#inputLength));
        this.#input = grown;
      }
      this.#input.set(from === chunk.length ? chunk : chunk.subarray(0, from), this.#inputLength);
      const at = this.#frames(this.#input, 0, end);
      if (at < end) {
        // Only when the whole chunk was appended: a frame ended in it, so what follows came
        // with it (a short move), or none did.
        if (at > 0) this.#input.copyWithin(0, at, end);
        this.#inputLength = end - at;
        return;
      }
      this.#input = NO_BYTES;
      this.#inputLength = 0;
      if (from === chunk.length) return;
    }
    const at = this.#frames(chunk, from, chunk.length);
    if (at < chunk.length) {
      // `chunk` may be reused after this call: keep a copy of its unparsed tail, in a buffer
      // the whole frame fits in when its header says how large it is.
      this.#input = new Uint8Array(Math.max(chunk.length - at, this.#inputFrameBytes));
      this.#input.set(chunk.subarray(at));
      this.#inputLength = chunk.length - at;
    }
  }

  /**
   * Parses the whole frames of `bytes[at, end)`; returns where the rest starts, with the size of
   * the frame it starts in `#inputFrameBytes` when its header is in (else 0).
   */
  #frames(bytes: Uint8Array, at: number, end: number): number {
    this.#inputFrameBytes = 0;
    while (!this.closeInfo) {
      const taken = this.#frame(bytes, at, end);
      if (taken === 0) break;
      at += taken;
    }
    return at;
  }

  /** The socket can take more: write what it did not take before. */
  drain(): void {
    const backlog = this.#backlog;
    if (!backlog) return;
    this.#backlog = undefined;
    this.#write(backlog, backlog.length);
  }

  /** The socket ended: without a close frame first, that is 1006. */
  socketClosed(): void {
    this.#end(ABNORMAL_CLOSURE, "");
  }

  /**
   * Parses one frame at `at` of `bytes[0, end)`; returns the bytes it took, or 0 when it is not
   * whole yet.
   */
  #frame(bytes: Uint8Array, at: number, end: number): number {
    if (end - at < 2) return 0;
    const first = bytes[at];
    const second = bytes[at + 1];
    const fin = (first & 0x80) !== 0;
    const opcode = first & 0x0f;
    if ((first & 0x70) !== 0 || (second & 0x80) !== 0) {
      // Reserved bits (no extension was negotiated) or a masked frame from a server.
      this.#protocolError(1002, "invalid frame");
      return 0;
    }
    let length = second & 0x7f;
    let header = 2;
    if (length === 126) {
      if (end - at < 4) return 0;
      length = (bytes[at + 2] << 8) | bytes[at + 3];
      header = 4;
    } else if (length === 127) {
      if (end - at < 10) return 0;
      const high = (bytes[at + 2] << 24 >>> 0) + (bytes[at + 3] << 16) + (bytes[at + 4] << 8) +
        bytes[at + 5];
      const low = (bytes[at + 6] << 24 >>> 0) + (bytes[at + 7] << 16) + (bytes[at + 8] << 8) +
        bytes[at + 9];
      length = high * 2 ** 32 + low;
      header = 10;
    }
    if (opcode >= 8 && (!fin || length > 125)) {
      this.#protocolError(1002, "invalid control frame");
      return 0;
    }
    if (opcode < 8 && this.#fragmentBytes + length > this.#maxFrameBytes) {
      this.#protocolError(1009, "frame too large");
      return 0;
    }
    if (end - at < header + length) {
      this.#inputFrameBytes = header + length;
      return 0;
    }
    const payload = bytes.subarray(at + header, at + header + length);
    switch (opcode) {
      case 0:
      case 1:
      case 2:
        this.#data(opcode, fin, payload);
        break;
      case 8:
        this.#closeFrame(payload);
        break;
      case 9:
        // #queue copies the payload out of the read buffer.
        if (!this.#closeSent && this.bufferedAmount < PONG_BACKLOG_BYTES) this.#queue(10, payload);
        break;
      case 10:
        break;
      default:
        this.#protocolError(1002, "unknown opcode");
        return 0;
    }
    return header + length;
  }

  #data(opcode: number, fin: boolean, payload: Uint8Array): void {
    if (opcode === 0 ? this.#fragmentOpcode === 0 : this.#fragmentOpcode !== 0) {
      this.#protocolError(1002, "unexpected continuation");
      return;
    }
    if (opcode !== 0) this.#fragmentOpcode = opcode;
    if (!fin) {
      (this.#fragments ??= []).push(payload.slice());
      this.#fragmentBytes += payload.length;
      return;
    }
    let whole = payload;
    if (this.#fragments) {
      whole = new Uint8Array(this.#fragmentBytes + payload.length);
      let offset = 0;
      for (const part of this.#fragments) {
        whole.set(part, offset);
        offset += part.length;
      }
      whole.set(payload, offset);
    }
    const text = this.#fragmentOpcode === 1;
    this.#fragments = undefined;
    this.#fragmentBytes = 0;
    this.#fragmentOpcode = 0;
    let frame: string;
    try {
      frame = text ? strictDecoder.decode(whole) : looseDecoder.decode(whole);
    } catch {
      this.#protocolError(1007, "invalid UTF-8");
      return;
    }
    this.deliver(frame);
  }

  #closeFrame(payload: Uint8Array): void {
    let code = 1005;
    let reason = "";
    if (payload.length === 1) {
      this.#protocolError(1002, "invalid close frame");
      return;
    }
    if (payload.length >= 2) {
      code = (payload[0] << 8) | payload[1];
      if (!isReceivableCloseCode(code)) {
        this.#protocolError(1002, "invalid close code");
        return;
      }
      try {
        reason = strictDecoder.decode(payload.subarray(2));
      } catch {
        this.#protocolError(1007, "invalid UTF-8");
        return;
      }
    }
    if (!this.#closeSent) {
      // Answer with the same code, as a closing endpoint does.
      if (code === 1005) this.#sendClose(undefined, "");
      else this.#sendClose(code, reason);
    }
    this.#end(code, reason);
  }

  #protocolError(code: number, reason: string): void {
    if (!this.#closeSent) this.#sendClose(code, reason);
    this.#end(code, reason);
  }

  #sendClose(code: number | undefined, reason: string): void {
    this.#closeSent = true;
    let payload = NO_BYTES;
    if (code !== undefined) {
      const text = encoder.encode(reason);
      payload = new Uint8Array(2 + text.length);
      payload[0] = code >> 8;
      payload[1] = code & 0xff;
      payload.set(text, 2);
    }
    this.#queue(8, payload);
    this.#flush();
  }

  #end(code: number, reason: string): void {
    if (this.closeInfo) return;
    if (this.#closeTimer !== undefined) clearTimeout(this.#closeTimer);
    this.#flush();
    this.finish(code, reason);
    try {
      this.#socket.end();
    } catch {
      // Already gone.
    }
  }

  /**
   * Masks one frame into the turn's buffer; the turn's frames are written together. Written in
   * place, byte by byte: a typed-array view (`subarray`) or a buffer per frame cost more than
   * the masking itself.
   */
  #queue(opcode: number, payload: Uint8Array): void {
    const length = payload.length;
    const header = length < 126 ? 2 : length < 65536 ? 4 : 10;
    let at = this.#outLength;
    const end = at + header + 4 + length;
    if (end > this.#out.length) {
      const size = Math.max(end, OUT_MIN_BYTES, this.#out.length * 2);
      const grown = this.#socket.allocate?.(size) ?? new Uint8Array(size);
      if (at) grown.set(this.#out.subarray(0, at));
      this.#out = grown;
    }
    const out = this.#out;
    out[at] = 0x80 | opcode;
    if (length < 126) out[at + 1] = 0x80 | length;
    else if (length < 65536) {
      out[at + 1] = 0x80 | 126;
      out[at + 2] = length >> 8;
      out[at + 3] = length & 0xff;
    } else {
      out[at + 1] = 0x80 | 127;
      const high = Math.floor(length / 2 ** 32);
      out[at + 2] = high >>> 24;
      out[at + 3] = (high >>> 16) & 0xff;
      out[at + 4] = (high >>> 8) & 0xff;
      out[at + 5] = high & 0xff;
      out[at + 6] = length >>> 24;
      out[at + 7] = (length >>> 16) & 0xff;
      out[at + 8] = (length >>> 8) & 0xff;
      out[at + 9] = length & 0xff;
    }
    at += header;
    if (maskAt + 4 > maskPool.length) {
      crypto.getRandomValues(maskPool);
      maskAt = 0;
    }
    const m0 = maskPool[maskAt];
    const m1 = maskPool[maskAt + 1];
    const m2 = maskPool[maskAt + 2];
    const m3 = maskPool[maskAt + 3];
    maskAt += 4;
    out[at] = m0;
    out[at + 1] = m1;
    out[at + 2] = m2;
    out[at + 3] = m3;
    at += 4;
    let i = 0;
    for (; i + 3 < length; i += 4) {
      out[at + i] = payload[i] ^ m0;
      out[at + i + 1] = payload[i + 1] ^ m1;
      out[at + i + 2] = payload[i + 2] ^ m2;
      out[at + i + 3] = payload[i + 3] ^ m3;
    }
    for (; i < length; i++) out[at + i] = payload[i] ^ out[at - 4 + (i & 3)];
    this.#outLength = end;
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      (this.#socket.afterTurn ?? afterTurn)(() => this.#flush());
    }
  }

  #flush(): void {
    this.#flushScheduled = false;
    const length = this.#outLength;
    if (length === 0 || this.closeInfo) return;
    // The next turn asks the adapter for a buffer again (it may hand this one out again).
    const out = this.#out;
    this.#out = NO_BYTES;
    this.#outLength = 0;
    if (this.#backlog) {
      const joined = new Uint8Array(this.#backlog.length + length);
      joined.set(this.#backlog);
      joined.set(out.subarray(0, length), this.#backlog.length);
      this.#backlog = joined;
      return;
    }
    this.#write(out, length);
  }

  /** Writes `data[0, length)`; what the socket does not take waits, copied, for `drain`. */
  #write(data: Uint8Array, length: number): void {
    let written: number;
    try {
      written = this.#socket.write(data, 0, length);
    } catch {
      this.#end(ABNORMAL_CLOSURE, "");
      return;
    }
    // A copy: `data` may be a turn buffer the adapter hands out again.
    if (written < length) this.#backlog = data.slice(Math.max(0, written), length);
  }
}
