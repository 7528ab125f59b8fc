/**
 * WebSocket client and server on Bun's own APIs: `Bun.serve` (TCP or Unix socket) with
 * `server.upgrade`, and the global `WebSocket` (handshake headers and `ws+unix` supported).
 */
import {
  closeAll,
  decideRequest,
  disposableServer,
  isLocalSocketUrl,
  isNamedPipe,
  localSocketPath,
  type RunningServer,
  type ServeWebSocketOptions,
} from "./server.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./bytes.ts";
import { removeStaleSocket } from "./stale-socket.node.ts";
import { assertSocketPathFits, refusedDial, socketUrl } from "./socket-path.node.ts";
import {
  ABNORMAL_CLOSURE,
  type DialOptions,
  SocketTransport,
  type Transport,
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
  cork?(run: () => void): void;
  getBufferedAmount?(): number;
  close(code?: number, reason?: string): void;
  terminate?(): void;
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

/**
 * A Transport over one of Bun's server sockets, fed by the server's websocket handlers.
 *
 * Bun writes what a socket's handler (and the microtasks after it) sends in one write, but each
 * send from any other task (a timer, `setImmediate`, another socket's I/O: a store's commit, a
 * tool result relayed from elsewhere) in a write of its own. So a turn's frames are kept and sent
 * together, corked, once its microtasks run.
 */
class BunServerTransport extends SocketTransport {
  readonly #socket: BunServerSocket;
  /** Frames sent in this turn and not yet handed to the socket, and their length. */
  #unsent: string[] = [];
  #unsentLength = 0;
  /** In the socket's message handler, which Bun runs corked. */
  #receiving = false;
  readonly #sendUnsent = () => this.#flush();
  readonly #sendEach = () => {
    const frames = this.#unsent;
    for (let i = 0; i < frames.length; i++) this.#socket.send(frames[i]);
  };

  constructor(socket: BunServerSocket) {
    super();
    this.#socket = socket;
  }
  /** Chosen at the upgrade, kept in the socket's data. */
  get protocol(): string {
    return this.#socket.data.protocol;
  }
  get bufferedAmount(): number | undefined {
    const socket = this.#socket.getBufferedAmount?.();
    return socket === undefined ? undefined : socket + this.#unsentLength;
  }

  send(frame: string): void {
    if (this.closeInfo) throw this.closedError();
    if (this.#unsent.length === 0) {
      // In the socket's own handler: corked already.
      if (this.#receiving) {
        this.#socket.send(frame);
        return;
      }
      queueMicrotask(this.#sendUnsent);
    }
    this.#unsent.push(frame);
    this.#unsentLength += frame.length;
  }
  #flush(): void {
    const frames = this.#unsent;
    if (frames.length === 0) return;
    if (frames.length === 1 || this.#socket.cork === undefined) this.#sendEach();
    else this.#socket.cork(this.#sendEach);
    this.#unsent = [];
    this.#unsentLength = 0;
  }
  protected closeSocket(code: number, reason: string): void {
    // What was sent before the close goes first.
    this.#flush();
    this.#socket.close(code, reason);
  }
  protected override abortSocket(code: number, reason: string): void {
    this.#unsent = [];
    this.#unsentLength = 0;
    if (this.#socket.terminate) this.#socket.terminate();
    else this.#socket.close(code, reason);
  }
  /** A message from the socket, text or bytes. */
  receive(message: string | Uint8Array): void {
    this.#receiving = true;
    try {
      this.deliver(typeof message === "string" ? message : decoder.decode(message));
    } finally {
      this.#receiving = false;
    }
  }
}

/**
 * Opens a WebSocket: `ws://` and `unix:///path.sock` over `Bun.connect`
 * (`transport/websocket-stream.bun.ts`), `wss://` with Bun's native client.
 */
export function dialWebSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  const refused = refusedDial(url);
  if (refused) return refused;
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
export async function serveWebSocket(
  options: ServeWebSocketOptions,
): Promise<RunningServer & AsyncDisposable> {
  // A Windows named pipe takes the node:net path the Unix socket tests cover.
  if (options.path && isNamedPipe(options.path)) return serveWithWs(options);
  if (options.path) {
    assertSocketPathFits(options.path, "listen on");
    // Bun.serve refuses a path where a file is (EADDRINUSE), a previous server's socket included.
    await removeStaleSocket(options.path);
  }
  let runtime: BunRuntime;
  try {
    runtime = bun();
  } catch (error) {
    return Promise.reject(error);
  }
  const open = new Set<BunServerTransport>();
  const fetch = async (request: Request, server: BunServer): Promise<Response | undefined> => {
    const decision = await decideRequest(request, options);
    if (!decision.accept) return decision.response;
    const upgraded = server.upgrade(request, {
      headers: { "Sec-WebSocket-Protocol": decision.protocol },
      data: { protocol: decision.protocol, onOpen: decision.onOpen },
    });
    if (upgraded) return undefined;
    // Bun refused the request as an upgrade (no valid `Sec-WebSocket-Key`, ...).
    decision.onAbandoned?.();
    return new Response("upgrade failed", { status: 400 });
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
        const transport = new BunServerTransport(ws);
        ws.data.transport = transport;
        open.add(transport);
        ws.data.onOpen(transport);
      },
      message(ws, message) {
        ws.data.transport?.receive(message);
      },
      close(ws, code, reason) {
        const transport = ws.data.transport;
        if (!transport) return;
        open.delete(transport);
        transport.finish(code || ABNORMAL_CLOSURE, reason);
      },
    },
  });
  const hostname = options.hostname ?? "127.0.0.1";
  const host = hostname.includes(":") ? `[${hostname}]` : hostname;
  const url = options.path ? socketUrl(options.path) : `ws://${host}:${server.port}`;
  return Promise.resolve(disposableServer({
    url,
    httpUrl: options.path ? url : `http://${host}:${server.port}`,
    close: async () => {
      await closeAll(open);
      server.stop(true);
    },
  }));
}
