/**
 * The raw baselines: a WebSocket echo on each runtime's own server and client (the stack the
 * SDK's runtime preset uses there, with no SDK code in between), and an NDJSON echo on a bare
 * Unix socket. The client keeps `inflight` frames outstanding and sends the next one as each
 * echo arrives: no promises, no parsing — the wire's own rate.
 */
import { createServer as createHttpServer } from "node:http";
import { createConnection, createServer as createNetServer, type Socket } from "node:net";
import { unlink } from "node:fs/promises";
import { WebSocket as WsWebSocket, WebSocketServer } from "ws";
import {
  latencyPercentiles,
  type Measured,
  recordLatency,
  RUNTIME,
  startLatencies,
} from "./common.ts";

/** Where a server listens: TCP on 127.0.0.1, or a Unix socket path. */
export type Where = { tcp: true } | { path: string };

/** A running echo server. */
export interface EchoServer {
  /** `ws://127.0.0.1:port`, `unix:///path` (WebSocket over a Unix socket) or the bare path. */
  readonly url: string;
  close(): Promise<void>;
}

/** The part of the WHATWG WebSocket used by the echo client. */
interface MinimalSocket {
  binaryType?: string;
  send(data: string): void;
  close(): void;
  onopen: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
}

interface DenoLike {
  serve(
    options: {
      hostname?: string;
      port?: number;
      path?: string;
      transport?: "unix";
      onListen?(): void;
    },
    handler: (request: Request) => Response,
  ): { addr: { port?: number }; shutdown(): Promise<void> };
  upgradeWebSocket(request: Request, options?: { idleTimeout?: number }): {
    socket: MinimalSocket;
    response: Response;
  };
}

interface BunWs {
  send(data: string | Uint8Array): number;
}

interface BunLike {
  serve(options: {
    hostname?: string;
    port?: number;
    unix?: string;
    fetch(request: Request, server: { upgrade(request: Request): boolean }): Response | undefined;
    websocket: {
      idleTimeout?: number;
      message(ws: BunWs, message: string | Uint8Array): void;
    };
  }): { port: number; stop(force?: boolean): void };
}

/** Starts a WebSocket echo server on this runtime's native server. */
export async function serveWsEcho(where: Where): Promise<EchoServer> {
  const path = "path" in where ? where.path : undefined;
  if (path) await unlink(path).catch(() => {});
  if (RUNTIME === "deno") {
    const deno = (globalThis as unknown as { Deno: DenoLike }).Deno;
    const handler = (request: Request) => {
      const { socket, response } = deno.upgradeWebSocket(request, { idleTimeout: 0 });
      socket.onmessage = (event) => socket.send(event.data as string);
      return response;
    };
    const server = path
      ? deno.serve({ transport: "unix", path, onListen() {} }, handler)
      : deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
    return {
      url: path ? `unix://${path}` : `ws://127.0.0.1:${server.addr.port}`,
      close: () => server.shutdown(),
    };
  }
  if (RUNTIME === "bun") {
    const bun = (globalThis as unknown as { Bun: BunLike }).Bun;
    const server = bun.serve({
      ...(path ? { unix: path } : { hostname: "127.0.0.1", port: 0 }),
      fetch(request, s) {
        return s.upgrade(request) ? undefined : new Response("upgrade failed", { status: 400 });
      },
      websocket: {
        idleTimeout: 0,
        message(ws, message) {
          ws.send(message);
        },
      },
    });
    return {
      url: path ? `unix://${path}` : `ws://127.0.0.1:${server.port}`,
      close: () => Promise.resolve(server.stop(true)),
    };
  }
  const http = createHttpServer();
  const wss = new WebSocketServer({ server: http });
  wss.on("connection", (ws) => {
    ws.on("message", (data, isBinary) => ws.send(data, { binary: isBinary }));
  });
  await new Promise<void>((resolve) => {
    if (path) http.listen(path, resolve);
    else http.listen(0, "127.0.0.1", resolve);
  });
  const port = (http.address() as { port: number }).port;
  return {
    url: path ? `unix://${path}` : `ws://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        http.close(() => resolve());
      }),
  };
}

/**
 * Opens a WebSocket client the way the SDK's preset on this runtime does: `ws` on Node and Deno
 * (transport/deno.ts dials with it), Bun's native client on Bun.
 */
function openWs(url: string): Promise<MinimalSocket> {
  const unix = url.startsWith("unix://");
  let socket: MinimalSocket;
  if (RUNTIME !== "bun") {
    const target = unix ? `ws+unix:${url.slice("unix://".length)}:/` : url;
    socket = new WsWebSocket(target) as unknown as MinimalSocket;
  } else {
    const Native = globalThis.WebSocket as unknown as new (url: string) => MinimalSocket;
    socket = new Native(unix ? `ws+unix://${url.slice("unix://".length)}` : url);
  }
  socket.binaryType = "arraybuffer";
  return new Promise((resolve, reject) => {
    socket.onopen = () => resolve(socket);
    socket.onerror = (event) => reject(new Error(`cannot open ${url}: ${String(event)}`));
  });
}

/** A client of an echo server that measures round trips. */
export interface EchoClient {
  run(inflight: number, ms: number): Promise<Measured>;
  close(): void;
}

/**
 * Keeps `inflight` frames outstanding: each arriving echo is counted and, until `ms` have
 * passed, answered with the next frame. `send` puts one frame on the wire; `setReceiver`
 * routes each arriving echo. Echoes arrive in the order their frames were sent (one
 * connection), so each one's latency is measured from the send time of the frame as many sends
 * back as have arrived: one clock reading per echo (the one that checks the deadline and
 * stamps the next frame), as in `measureLoop`.
 */
function echoLoop(
  send: () => void,
  setReceiver: (receiver: () => void) => void,
  inflight: number,
  ms: number,
): Promise<Measured> {
  return new Promise((resolve) => {
    let count = 0;
    let outstanding = 0;
    // When each outstanding frame was sent: a ring of `inflight` slots, in send order.
    const sentAt = new Float64Array(inflight);
    let sent = 0;
    startLatencies();
    const started = performance.now();
    const end = started + ms;
    let stopping = false;
    setReceiver(() => {
      const now = performance.now();
      recordLatency(now - sentAt[count % inflight]);
      count++;
      outstanding--;
      if (!stopping && now >= end) stopping = true;
      if (!stopping) {
        outstanding++;
        sentAt[sent++ % inflight] = now;
        send();
      } else if (outstanding === 0) {
        const elapsed = performance.now() - started;
        resolve({ count, ms: elapsed, ...latencyPercentiles() });
      }
    });
    for (let i = 0; i < inflight; i++) {
      outstanding++;
      sentAt[sent++ % inflight] = performance.now();
      send();
    }
  });
}

/** Connects a WebSocket echo client that sends `frame`. */
export async function wsEchoClient(url: string, frame: string): Promise<EchoClient> {
  const socket = await openWs(url);
  let receiver: () => void = () => {};
  socket.onmessage = () => receiver();
  return {
    run: (inflight, ms) => echoLoop(() => socket.send(frame), (r) => (receiver = r), inflight, ms),
    close: () => socket.close(),
  };
}

/** Starts an NDJSON echo server on a Unix socket (`node:net`, which all three runtimes run). */
export async function serveNdjsonEcho(path: string): Promise<EchoServer> {
  await unlink(path).catch(() => {});
  const server = createNetServer((socket) => {
    socket.setNoDelay?.(true);
    socket.on("data", (chunk) => socket.write(chunk));
    socket.on("error", () => socket.destroy());
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return {
    url: path,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Connects an NDJSON echo client that sends `frame` as one line. */
export async function ndjsonEchoClient(path: string, frame: string): Promise<EchoClient> {
  const socket: Socket = await new Promise((resolve, reject) => {
    const s = createConnection(path, () => resolve(s));
    s.once("error", reject);
  });
  const line = `${frame}\n`;
  let receiver: () => void = () => {};
  socket.setEncoding("utf8");
  socket.on("data", (chunk: string) => {
    // Count every complete line that arrived (an echo may come split or coalesced).
    let at = chunk.indexOf("\n");
    while (at >= 0) {
      receiver();
      at = chunk.indexOf("\n", at + 1);
    }
  });
  return {
    run: (inflight, ms) => echoLoop(() => socket.write(line), (r) => (receiver = r), inflight, ms),
    close: () => socket.destroy(),
  };
}
