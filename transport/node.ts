/**
 * WebSocket client and server on Node's APIs (which Deno and Bun also run through their Node
 * compatibility): the server and `wss://` dials with the `ws` package, `ws://` and Unix-socket
 * dials with the byte-stream client (`websocket-stream.node.ts`); TCP and Unix sockets, with
 * subprotocol negotiation and the frame limit. Named pipes (`\\.\pipe\name`, Windows only)
 * take the Unix socket code path.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { unlink } from "node:fs/promises";
import { removeStaleSocket } from "./stale-socket.node.ts";
import { assertSocketPathFits, refusedDial, socketUrl } from "./socket-path.node.ts";
import { WebSocket, WebSocketServer } from "ws";
import {
  CLOSE_WAIT_MS,
  DialError,
  type DialOptions,
  SocketTransport,
  type Transport,
} from "./transport.ts";
import {
  badRequestAnswer,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  disposableServer,
  isLocalSocketUrl,
  isNamedPipe,
  localSocketPath,
  malformedHost,
  offeredProtocols,
  type RunningServer,
  type ServeWebSocketOptions,
} from "./server.ts";

export type { RunningServer, ServeWebSocketOptions, UpgradeDecision } from "./server.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./bytes.ts";
import { dialNetSocket } from "./websocket-stream.node.ts";
import { systemClock } from "../protocol/clock.ts";
import { silentLogger } from "../protocol/logger.ts";
import {
  answerRequest,
  DEFAULT_SLOW_CLIENT_TIMEOUT_MS,
  type FetchBridge,
  sendAnswer,
} from "../http/shared/fetch-bridge.node.ts";
import { canDialByteWebSocket } from "./websocket-stream.ts";
import { awaitHandshake, handshakeDone } from "./handshake-deadline.node.ts";

/**
 * Opens a WebSocket connection: `ws://`, `unix:///path.sock` and `\\.\pipe\name` with the
 * byte-stream client over `node:net` (`websocket-stream.node.ts`: a turn's frames in one write),
 * `wss://` with `ws`.
 */
export function dialWebSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  const refused = refusedDial(url);
  if (refused) return refused;
  if (canDialByteWebSocket(url)) return dialNetSocket(url, options);
  return dialWithWs(url, options);
}

/** Opens a WebSocket connection with `ws`: `ws://`, `wss://`, `unix:///path.sock`, `\\.\pipe\name`. */
export function dialWithWs(url: string, options: DialOptions = {}): Promise<Transport> {
  const refused = refusedDial(url);
  if (refused) return refused;
  const protocols = options.protocols ?? [];
  const maxPayload = (options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES) + 1024;
  return new Promise((resolve, reject) => {
    if (options.signal?.aborted) {
      reject(new DialError("dial aborted", undefined, { cause: options.signal.reason }));
      return;
    }
    let socket: WebSocket;
    // No `permessage-deflate` offer, which `ws` makes by default (why: `dialNativeWebSocket`).
    const perMessageDeflate = false;
    try {
      if (isLocalSocketUrl(url)) {
        // Unix sockets and named pipes share this path: ws hands the socket path to node:net.
        socket = new WebSocket(`ws+unix:${localSocketPath(url)}:/`, protocols, {
          headers: options.headers,
          maxPayload,
          perMessageDeflate,
          ...closeTimeout(CLOSE_WAIT_MS),
        });
      } else {
        socket = new WebSocket(url, protocols, {
          headers: options.headers,
          maxPayload,
          perMessageDeflate,
          ...closeTimeout(CLOSE_WAIT_MS),
        });
      }
    } catch (error) {
      reject(new DialError(`cannot dial ${redactUrl(url)}`, undefined, { cause: error }));
      return;
    }
    let settled = false;
    const onAbort = () => {
      if (settled) return;
      settled = true;
      socket.terminate();
      reject(new DialError("dial aborted", undefined, { cause: options.signal?.reason }));
    };
    options.signal?.addEventListener("abort", onAbort, { once: true });
    socket.once("unexpected-response", (_req, res) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener("abort", onAbort);
      reject(new DialError(`upgrade refused with HTTP ${res.statusCode}`, res.statusCode));
      res.resume();
      socket.terminate();
    });
    socket.once("error", (error) => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener("abort", onAbort);
      reject(new DialError(`cannot connect to ${redactUrl(url)}`, undefined, { cause: error }));
    });
    // Wrap before "open" so no frame sent right after the handshake is missed.
    const transport = new WsTransport(socket, undefined);
    socket.once("open", () => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener("abort", onAbort);
      resolve(transport);
    });
  });
}

/** The stream under a `ws` socket, as far as batching its writes goes. */
interface Corkable {
  cork(): void;
  uncork(): void;
}

/** Where a `ws` socket keeps its transport (the listeners below are shared by all sockets). */
const TRANSPORT: unique symbol = Symbol("bma.transport");

type TransportSocket = WebSocket & { [TRANSPORT]?: WsTransport };

const OPEN = 1;
const CLOSED = 3;
const decoder = new TextDecoder();

/**
 * A {@linkcode Transport} over a `ws` socket. Behaves as `webSocketTransport` of
 * transport/websocket.ts does over a WHATWG socket (close codes and reasons, subprotocol,
 * frames buffered until `listen`), with what a harness holding thousands of idle connections
 * needs: `ws`'s own events with listeners shared by every socket (its WHATWG
 * `addEventListener` wraps each listener in two closures per socket), and state made only when
 * used. Every frame sent in one turn of the event loop is written together: the first send of
 * a turn corks the TCP (or Unix) socket, the end of the turn (`setImmediate`) uncorks it, so a
 * request's answer and what its handler sends right after (a tool call's ack and its result)
 * reach the peer in one write and wake it once, where `ws` alone makes one write per frame.
 */
class WsTransport extends SocketTransport {
  readonly #ws: WebSocket;
  readonly #protocol: string | undefined;
  #corked: Corkable | undefined;

  constructor(ws: WebSocket, protocol: string | undefined) {
    super();
    this.#ws = ws;
    this.#protocol = protocol;
    (ws as TransportSocket)[TRANSPORT] = this;
    ws.on("message", onSocketMessage);
    ws.on("close", onSocketClose);
    ws.on("error", onSocketError);
    if (ws.readyState > OPEN) this.finishAbnormally();
  }

  /** Read from the socket unless given: a client socket knows it only once open. */
  get protocol(): string {
    return this.#protocol ?? this.#ws.protocol;
  }

  get bufferedAmount(): number {
    return this.#ws.bufferedAmount;
  }

  send(frame: string): void {
    const ws = this.#ws;
    if (this.closeInfo || ws.readyState !== OPEN) throw this.closedError();
    if (!this.#corked) {
      const socket = (ws as unknown as { _socket?: Partial<Corkable> })._socket;
      // Bun's own client behind the `ws` API has a socket without cork: it writes as it goes.
      if (typeof socket?.cork === "function" && typeof socket.uncork === "function") {
        socket.cork();
        this.#corked = socket as Corkable;
        setImmediate(uncorkLater, this);
      }
    }
    ws.send(frame);
  }

  protected closeSocket(code: number, reason: string): void {
    try {
      this.#ws.close(code, reason);
    } catch {
      // A client socket that refuses codes outside 1000/3000-4999 (Bun's): close normally then.
      this.#ws.close(1000, reason);
    }
  }

  protected override abortSocket(): void {
    this.#corked = undefined;
    this.#ws.terminate();
  }

  /** Writes what the turn corked. */
  flush(): void {
    const socket = this.#corked;
    this.#corked = undefined;
    socket?.uncork();
  }

  socketError(): void {
    // An error is followed by a close event on a conforming socket; a socket that never
    // opened, or dies without one, still ends here.
    if (this.#ws.readyState === CLOSED) this.finishAbnormally();
  }
}

function onSocketMessage(this: TransportSocket, data: unknown, isBinary: boolean): void {
  let frame: string;
  if (typeof data === "string") frame = data;
  else if (!isBinary && data instanceof Buffer) frame = data.toString();
  else if (data instanceof ArrayBuffer || ArrayBuffer.isView(data)) frame = decoder.decode(data);
  else if (Array.isArray(data)) {
    frame = data.map((part: Uint8Array) => decoder.decode(part)).join("");
  } else return;
  this[TRANSPORT]?.deliver(frame);
}

function onSocketClose(this: TransportSocket, code: number, reason: unknown): void {
  this[TRANSPORT]?.finish(code || 1005, reason === undefined ? "" : String(reason));
}

function onSocketError(this: TransportSocket): void {
  this[TRANSPORT]?.socketError();
}

function uncorkLater(transport: WsTransport): void {
  transport.flush();
}

/** `ws`'s `closeTimeout` option (its default is 30 s), which `@types/ws` does not declare. */
function closeTimeout(ms: number): Record<never, never> {
  return { closeTimeout: ms };
}

/** Drops credentials and query (which may carry tokens) from a URL before it is shown. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return "(url)";
  }
}

/**
 * Serves WebSocket upgrades and plain HTTP on Node's `http` server with `ws`. Every accepted
 * connection has `handshakeTimeoutMs` to complete its request (an upgrade until its 101 is out,
 * HTTP until its headers are in), or it is destroyed: a socket that sends part of a request and
 * holds still costs the server nothing for long. Plain HTTP goes to `options.fetch` through the
 * bridge of `fetch-bridge.node.ts` (the inspector's): a body is read only if the handler reads
 * it (so only once it has authenticated the request), at most 64 MiB, and must keep arriving
 * (no pause of `handshakeTimeoutMs`); responses are streamed.
 */
export async function serveWebSocket(
  options: ServeWebSocketOptions,
): Promise<RunningServer & AsyncDisposable> {
  const maxPayload = (options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES) + 1024;
  const handshakeMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const chosen = new WeakMap<IncomingMessage, string>();
  const bridge: FetchBridge = {
    maxRequestBytes: MAX_HTTP_BODY_BYTES,
    bodyTimeoutMs: handshakeMs,
    slowClientTimeoutMs: DEFAULT_SLOW_CLIENT_TIMEOUT_MS,
    clock: systemClock,
    logger: silentLogger,
  };
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload,
    // A connection the server closes is dropped if its peer does not answer the close frame.
    ...closeTimeout(Math.min(CLOSE_WAIT_MS, handshakeMs)),
    handleProtocols: (_offered, req) => chosen.get(req) ?? false,
  });
  const server: Server = createServer({
    // Node's own check of headersTimeout (for the later requests of a kept-alive connection)
    // runs at this interval.
    connectionsCheckingInterval: Math.min(30_000, Math.max(250, Math.floor(handshakeMs / 2))),
  }, (req, res) => {
    handshakeDone(req.socket);
    void handleHttp(req, res, options, bridge);
  });
  if (server.requestTimeout === 0 || server.requestTimeout >= handshakeMs) {
    server.headersTimeout = handshakeMs;
  }
  // A client that sends its whole request and then ends its side (`nc -N`, HTTP/1.0 tools, some
  // proxies) still gets its answer: Node's server otherwise drops a request still being answered
  // when the client's FIN arrives, while the work it asked for may go on.
  (server as { httpAllowHalfOpen?: boolean }).httpAllowHalfOpen = true;
  // Every header counts, however many (Node keeps the first 1,000 and drops the rest without a
  // word, an `authorization` among them): their size is bounded (16 KiB, else 431).
  server.maxHeadersCount = 0;
  server.on("connection", (socket: Duplex) => awaitHandshake(socket, handshakeMs));
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // A listener of its own, not a closure: one here would keep this scope (the request, its
    // headers and the buffer under `head`) for as long as the socket lives.
    socket.on("error", destroySocket);
    const url = requestUrl(req, base);
    if (typeof url === "string") {
      void writeRawResponse(socket, badRequestAnswer(options, url));
      return;
    }
    const request = toRequest(req, url);
    options.upgrade(request, offeredProtocols(request)).then((decision) => {
      if (!decision.accept) {
        void writeRawResponse(socket, decision.response);
        return;
      }
      chosen.set(req, decision.protocol);
      // `ws` answers a request it refuses (no valid key, a POST, `Upgrade: h2c`) and destroys
      // the socket without calling back, as it does for a socket gone before the 101: the
      // socket's close then tells the decider its acceptance came to nothing.
      const abandoned = () => decision.onAbandoned?.();
      if (socket.destroyed) {
        abandoned();
        return;
      }
      socket.once("close", abandoned);
      wss.handleUpgrade(req, socket, head, (ws) => {
        // `ws` handles the socket's errors from here on, and the handshake is over.
        socket.removeListener("error", destroySocket);
        socket.removeListener("close", abandoned);
        handshakeDone(socket);
        decision.onOpen(new WsTransport(ws, decision.protocol));
      });
    }, () => {
      void writeRawResponse(socket, new Response("internal error", { status: 500 }));
    });
  });
  let base: string;
  let url: string;
  if (options.path) {
    if (!isNamedPipe(options.path)) {
      assertSocketPathFits(options.path, "listen on");
      await removeStaleSocket(options.path);
    }
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.path, () => resolve());
    });
    base = "http://localhost";
    url = isNamedPipe(options.path) ? options.path : socketUrl(options.path);
  } else {
    const hostname = options.hostname ?? "127.0.0.1";
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(options.port ?? 0, hostname, () => resolve());
    });
    const address = server.address() as { port: number };
    const host = hostname.includes(":") ? `[${hostname}]` : hostname;
    base = `http://${host}:${address.port}`;
    url = `ws://${host}:${address.port}`;
  }
  return disposableServer({
    url,
    httpUrl: options.path ? url : base,
    close: async () => {
      for (const client of wss.clients) client.close(1001, "server shutting down");
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
        // Sockets still draining their close handshake get a moment, then are cut.
        setTimeout(() => {
          for (const client of wss.clients) client.terminate();
        }, 1000).unref?.();
      });
      wss.close();
      if (options.path && !isNamedPipe(options.path)) {
        await unlink(options.path).catch(() => {});
      }
    },
  });
}

function destroySocket(this: Duplex): void {
  this.destroy();
}

/**
 * The URL `req` names, against `base` (the `Host` header's when not given), or why it names none
 * (`malformedRequest` of `server.ts`): checked before its body is read or anything parses it.
 */
function requestUrl(req: IncomingMessage, base?: string): URL | string {
  const host = req.headers.host ?? null;
  const malformed = malformedHost(host);
  if (malformed) return malformed;
  try {
    return new URL(req.url ?? "/", base ?? `http://${host ?? "localhost"}`);
  } catch {
    return "malformed request target";
  }
}

function toRequest(req: IncomingMessage, url: URL): Request {
  const headers = new Headers();
  for (const [key, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) { for (const v of value) headers.append(key, v); }
    else if (value !== undefined) headers.set(key, value);
  }
  return new Request(url, { method: req.method, headers });
}

/** Largest plain-HTTP request body this server reads (an artifact upload's, a brain's). */
const MAX_HTTP_BODY_BYTES = 64 * 1024 * 1024;

/** Answers a plain HTTP request: `options.fetch`'s answer (404 without one), or a 400. */
function handleHttp(
  req: IncomingMessage,
  res: ServerResponse,
  options: ServeWebSocketOptions,
  bridge: FetchBridge,
): Promise<void> {
  const url = requestUrl(req);
  if (typeof url === "string") return sendAnswer(req, res, badRequestAnswer(options, url), bridge);
  return answerRequest(
    req,
    res,
    url,
    (request) =>
      options.fetch
        ? options.fetch(request)
        : Promise.resolve(new Response("not found", { status: 404 })),
    bridge,
  );
}

async function writeRawResponse(socket: Duplex, response: Response): Promise<void> {
  const body = new Uint8Array(await response.arrayBuffer());
  let head = `HTTP/1.1 ${response.status} ${
    response.statusText || "Refused"
  }\r\nconnection: close\r\ncontent-length: ${body.byteLength}\r\n`;
  response.headers.forEach((value, key) => {
    if (key !== "content-length" && key !== "connection") head += `${key}: ${value}\r\n`;
  });
  socket.end(Buffer.concat([Buffer.from(head + "\r\n"), Buffer.from(body)]));
}
