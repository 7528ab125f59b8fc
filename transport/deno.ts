/**
 * WebSocket server on Deno's own APIs: `Deno.serve` (TCP or Unix socket) with
 * `Deno.upgradeWebSocket`. Dials go through `transport/node.ts` (the byte-stream client over
 * Deno's `node:net`, `ws` for `wss://`): Deno's native client refuses `ws+unix`, and over TCP it
 * leaves Nagle's algorithm on, so a second frame sent before the first is acknowledged waits for
 * the peer's delayed ACK — an executor's tool-call ack and result, on every call.
 */
import { dialWebSocket as dialWithNode, serveWebSocket as serveWithWs } from "./node.ts";
import { DEFAULT_MAX_FRAME_BYTES } from "./bytes.ts";
import { removeStaleSocket } from "./stale-socket.node.ts";
import { assertSocketPathFits, socketUrl } from "./socket-path.node.ts";
import {
  closeAll,
  decideRequest,
  disposableServer,
  isNamedPipe,
  type RunningServer,
  type ServeWebSocketOptions,
} from "./server.ts";
import type { DialOptions, Transport } from "./transport.ts";
import { type WebSocketLike, webSocketTransport } from "./websocket.ts";

export type { RunningServer, ServeWebSocketOptions, UpgradeDecision } from "./server.ts";

/** The part of the Deno namespace used here, typed locally so other checkers compile it. */
interface DenoServe {
  serve(
    options: {
      hostname?: string;
      port?: number;
      path?: string;
      transport?: "unix";
      onListen?: (addr: unknown) => void;
    },
    handler: (request: Request, info: { remoteAddr: unknown }) => Response | Promise<Response>,
  ): {
    addr: { hostname?: string; port?: number; path?: string };
    shutdown(): Promise<void>;
    finished: Promise<void>;
  };
  upgradeWebSocket(request: Request, options?: { protocol?: string; idleTimeout?: number }): {
    socket: WebSocketLike & { addEventListener(type: "open", listener: () => void): void };
    response: Response;
  };
  remove(path: string): Promise<void>;
}

function deno(): DenoServe {
  const value = (globalThis as { Deno?: DenoServe }).Deno;
  if (!value) throw new Error("transport/deno.ts needs the Deno runtime");
  return value;
}

/**
 * Opens a WebSocket as `transport/node.ts` does: `ws://` and `unix:///path.sock` with the
 * byte-stream client, `wss://` with `ws`.
 */
export function dialWebSocket(url: string, options: DialOptions = {}): Promise<Transport> {
  return dialWithNode(url, options);
}

/**
 * Serves WebSocket upgrades and plain HTTP with `Deno.serve`, over TCP or a Unix socket.
 * `Deno.serve` hands over a connection only once its request is complete and never closes one
 * whose request stays incomplete, so `handshakeTimeoutMs` cannot be honoured here: a socket that
 * sent part of a request stays open until its peer leaves. `harness/deno.ts` therefore serves
 * TCP with `transport/node.ts` (which honours it); on a Unix socket, served here, the socket's
 * permissions decide who may connect at all.
 */
export async function serveWebSocket(
  options: ServeWebSocketOptions,
): Promise<RunningServer & AsyncDisposable> {
  // A Windows named pipe takes the node:net path the Unix socket tests cover (`Deno.serve`
  // listens on Unix sockets only).
  if (options.path && isNamedPipe(options.path)) return await serveWithWs(options);
  const runtime = deno();
  const open = new Set<Transport>();
  const handler = async (request: Request): Promise<Response> => {
    const decision = await decideRequest(request, options);
    if (!decision.accept) return decision.response;
    let upgraded: ReturnType<DenoServe["upgradeWebSocket"]>;
    try {
      // Deno splits the offered list only on ", " (the `ws` client sends "a,b"): negotiate
      // here and set the header on the 101 response ourselves.
      upgraded = runtime.upgradeWebSocket(request, { protocol: "", idleTimeout: 0 });
    } catch {
      // A request Deno cannot upgrade (no `Sec-WebSocket-Key`, ...): a 400, not the 500 of a
      // handler that throws, and the acceptance is given back.
      decision.onAbandoned?.();
      return new Response("not a valid WebSocket upgrade", { status: 400 });
    }
    const { socket, response } = upgraded;
    response.headers.set("sec-websocket-protocol", decision.protocol);
    const transport = webSocketTransport(socket, {
      protocol: decision.protocol,
      maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES,
    });
    open.add(transport);
    let opened = false;
    transport.closed.then(() => {
      open.delete(transport);
      // Closed before it opened: the peer left before the 101.
      if (!opened) decision.onAbandoned?.();
    });
    socket.addEventListener("open", () => {
      opened = true;
      decision.onOpen(transport);
    });
    return response;
  };
  let url: string;
  let httpUrl: string;
  let server: ReturnType<DenoServe["serve"]>;
  if (options.path) {
    assertSocketPathFits(options.path, "listen on");
    await removeStaleSocket(options.path);
    server = runtime.serve({ transport: "unix", path: options.path, onListen: () => {} }, handler);
    url = httpUrl = socketUrl(options.path);
  } else {
    const hostname = options.hostname ?? "127.0.0.1";
    server = runtime.serve({ hostname, port: options.port ?? 0, onListen: () => {} }, handler);
    const host = hostname.includes(":") ? `[${hostname}]` : hostname;
    url = `ws://${host}:${server.addr.port}`;
    httpUrl = `http://${host}:${server.addr.port}`;
  }
  return disposableServer({
    url,
    httpUrl,
    close: async () => {
      await closeAll(open);
      await server.shutdown();
      if (options.path) await runtime.remove(options.path).catch(() => {});
    },
  });
}
