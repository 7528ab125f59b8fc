/**
 * WebSocket client and server on Bun's own APIs: `Bun.serve` (TCP or Unix socket) with
 * `server.upgrade`, and the global `WebSocket` (handshake headers and `ws+unix` supported).
 */
import {
  isLocalSocketUrl,
  isNamedPipe,
  localSocketPath,
  type RunningServer,
  type ServeWebSocketOptions,
  type UpgradeDecision,
} from "./server.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./bytes.ts";
import {
  ABNORMAL_CLOSURE,
  assertSendableCloseCode,
  clampCloseReason,
  type CloseInfo,
  type DialOptions,
  type Transport,
  TransportClosedError,
  type TransportReceiver,
} from "./transport.ts";
import { dialNativeWebSocket } from "./websocket.ts";
import { dialBunSocket } from "./websocket-stream.bun.ts";
import { canDialByteWebSocket } from "./websocket-stream.ts";
import { dialWebSocket as dialWithNode, serveWebSocket as serveWithWs } from "./node.ts";

export type { RunningServer, ServeWebSocketOptions, UpgradeDecision } from "./server.ts";

/** Bun's server-side socket, typed locally so other checkers compile this file. */
interface BunServerSocket {
  readonly data: BunSocketData;
  send(data: string): number;
  getBufferedAmount?(): number;
  close(code?: number, reason?: string): void;
}
interface BunSocketData {
  transport?: BunServerTransport;
  protocol: string;
  onOpen: (transport: Transport) => void;
}
interface BunServer {
  readonly port: number;
  upgrade(
    request: Request,
    options: { headers?: Record<string, string>; data: BunSocketData },
  ): boolean;
  stop(closeActiveConnections?: boolean): void;
}
interface BunRuntime {
  serve(options: {
    hostname?: string;
    port?: number;
    unix?: string;
    fetch(
      request: Request,
      server: BunServer,
    ): Response | undefined | Promise<Response | undefined>;
    websocket: {
      maxPayloadLength?: number;
      idleTimeout?: number;
      open(ws: BunServerSocket): void;
      message(ws: BunServerSocket, message: string | Uint8Array): void;
      close(ws: BunServerSocket, code: number, reason: string): void;
    };
  }): BunServer;
}

function bun(): BunRuntime {
  const value = (globalThis as { Bun?: BunRuntime }).Bun;
  if (!value) throw new Error("transport/bun.ts needs the Bun runtime");
  return value;
}

const decoder = new TextDecoder();

/** A Transport over one of Bun's server sockets, fed by the server's websocket handlers. */
class BunServerTransport implements Transport {
  readonly protocol: string;
  readonly closed: Promise<CloseInfo>;
  readonly #socket: BunServerSocket;
  #receiver: TransportReceiver | undefined;
  #buffer: string[] | undefined = [];
  #closeInfo: CloseInfo | undefined;
  #resolve!: (info: CloseInfo) => void;

  constructor(socket: BunServerSocket, protocol: string) {
    this.#socket = socket;
    this.protocol = protocol;
    this.closed = new Promise((resolve) => (this.#resolve = resolve));
  }
  get bufferedAmount(): number | undefined {
    return this.#socket.getBufferedAmount?.();
  }

  send(frame: string): void {
    if (this.#closeInfo) {
      throw new TransportClosedError(this.#closeInfo.code, this.#closeInfo.reason);
    }
    this.#socket.send(frame);
  }
  listen(receiver: TransportReceiver): void {
    if (this.#receiver) throw new Error("listen() may be called once");
    this.#receiver = receiver;
    const buffered = this.#buffer!;
    this.#buffer = undefined;
    for (const frame of buffered) receiver(frame);
  }
  close(code = 1000, reason = ""): void {
    assertSendableCloseCode(code);
    if (!this.#closeInfo) this.#socket.close(code, clampCloseReason(reason));
  }
  deliver(message: string | Uint8Array): void {
    const frame = typeof message === "string" ? message : decoder.decode(message);
    if (this.#buffer) this.#buffer.push(frame);
    else this.#receiver!(frame);
  }
  finish(code: number, reason: string): void {
    if (this.#closeInfo) return;
    this.#closeInfo = { code: code || ABNORMAL_CLOSURE, reason };
    this.#resolve(this.#closeInfo);
  }
}

/**
 * Opens a WebSocket: `ws://` and `unix:///path.sock` over `Bun.connect`
 * (`transport/websocket-stream.bun.ts`), `wss://` with Bun's native client.
 */
export function dialWebSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  // A Windows named pipe takes the node:net path (transport/node.ts) the Unix socket tests cover.
  if (isLocalSocketUrl(url) && isNamedPipe(localSocketPath(url))) return dialWithNode(url, options);
  // ws:// and Unix sockets: a client that writes a turn's frames at once (see its module).
  if (canDialByteWebSocket(url)) return dialBunSocket(url, options);
  const target = isLocalSocketUrl(url) ? `ws+unix://${localSocketPath(url)}` : url;
  return dialNativeWebSocket(target, options);
}

/**
 * Serves WebSocket upgrades and plain HTTP with `Bun.serve`, over TCP or a Unix socket.
 * `Bun.serve` closes a connection whose request is not complete after about 10 s by itself
 * (seen at 12 s, whatever its `idleTimeout`, and bytes trickling in do not extend it) and offers
 * no hook before a request is complete, so `handshakeTimeoutMs` is not honoured here: serve with
 * `transport/node.ts` (on Bun too) for a shorter deadline.
 */
export function serveWebSocket(options: ServeWebSocketOptions): Promise<RunningServer> {
  // A Windows named pipe takes the node:net path the Unix socket tests cover.
  if (options.path && isNamedPipe(options.path)) return serveWithWs(options);
  let runtime: BunRuntime;
  try {
    runtime = bun();
  } catch (error) {
    return Promise.reject(error);
  }
  const open = new Set<BunServerTransport>();
  const fetch = async (request: Request, server: BunServer): Promise<Response | undefined> => {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      return options.fetch
        ? await options.fetch(request)
        : new Response("not found", { status: 404 });
    }
    const offered = (request.headers.get("sec-websocket-protocol") ?? "").split(",")
      .map((p) => p.trim()).filter(Boolean);
    let decision: UpgradeDecision;
    try {
      decision = await options.upgrade(request, offered);
    } catch {
      return new Response("internal error", { status: 500 });
    }
    if (!decision.accept) return decision.response;
    const upgraded = server.upgrade(request, {
      headers: { "Sec-WebSocket-Protocol": decision.protocol },
      data: { protocol: decision.protocol, onOpen: decision.onOpen },
    });
    return upgraded ? undefined : new Response("upgrade failed", { status: 400 });
  };
  const server = runtime.serve({
    ...(options.path
      ? { unix: options.path }
      : { hostname: options.hostname ?? "127.0.0.1", port: options.port ?? 0 }),
    fetch,
    websocket: {
      maxPayloadLength: (options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES) + 1024,
      idleTimeout: 0,
      open(ws) {
        const transport = new BunServerTransport(ws, ws.data.protocol);
        ws.data.transport = transport;
        open.add(transport);
        ws.data.onOpen(transport);
      },
      message(ws, message) {
        ws.data.transport?.deliver(message);
      },
      close(ws, code, reason) {
        const transport = ws.data.transport;
        if (!transport) return;
        open.delete(transport);
        transport.finish(code, reason);
      },
    },
  });
  const hostname = options.hostname ?? "127.0.0.1";
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  const url = options.path ? `unix://${options.path}` : `ws://${host}:${server.port}`;
  return Promise.resolve({
    url,
    httpUrl: options.path ? url : `http://${host}:${server.port}`,
    close: async () => {
      for (const transport of open) transport.close(1001, "server shutting down");
      await Promise.race([
        Promise.all([...open].map((t) => t.closed)),
        new Promise((r) => setTimeout(r, 1000)),
      ]);
      server.stop(true);
    },
  });
}
