/**
 * Serves an inspector (or any web-standard handler) with `node:http` on 127.0.0.1: Node, and
 * Deno and Bun through their Node compatibility. The bridge from `node:http` to the handler is
 * `fetch-bridge.node.ts`'s, shared with the harness's own server: bodies read only if the handler
 * reads them, responses streamed as they are produced (the page's live updates are a stream that
 * never ends on its own), a client that goes away aborts its request's signal and cancels its
 * stream, and one that takes nothing of a response for `slowClientTimeoutMs` is disconnected.
 * `close` ends every connection, streams included.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import { type Logger, silentLogger } from "../../protocol/logger.ts";
import { requestedUrl, servedHosts } from "../shared/host-origin.ts";
import {
  answerRequest,
  DEFAULT_SLOW_CLIENT_TIMEOUT_MS as BRIDGE_SLOW_CLIENT_TIMEOUT_MS,
  type FetchBridge,
  sendAnswer,
} from "../shared/fetch-bridge.node.ts";
import { DEFAULT_HANDSHAKE_TIMEOUT_MS } from "../../transport/server.ts";
import { awaitHandshake, handshakeDone } from "../../transport/handshake-deadline.node.ts";
import type { Inspector } from "./inspector.ts";

/**
 * The default of {@linkcode ServeInspectorOptions.slowClientTimeoutMs}: 30 s, the bridge's.
 * Declared here rather than re-exported: the bridge's declarations name `node:http`'s types,
 * which a consumer without Node's types cannot read.
 */
export const DEFAULT_SLOW_CLIENT_TIMEOUT_MS: number = BRIDGE_SLOW_CLIENT_TIMEOUT_MS;

/** Options of {@linkcode serveInspector}. */
export interface ServeInspectorOptions {
  /** The port on 127.0.0.1. Default 0 (a free one). */
  port?: number;
  /**
   * Host names (without the port) requests may name besides the loopback ones (`127.0.0.1`,
   * `localhost`, `[::1]`): a name a proxy in front of it serves. A request naming any other host
   * is refused with 421, so that a page of another site whose name resolves to 127.0.0.1 (DNS
   * rebinding) reaches nothing.
   */
  allowedHosts?: readonly string[];
  /**
   * How long a response may wait for its client to take more (a write that does not drain, an
   * end that does not flush): past it the connection is reset, and what was queued for the
   * client, here and in the kernel, is discarded (nginx's `send_timeout` with
   * `reset_timedout_connection`). A client that reads stays connected however long a stream
   * lasts. Default 30 s ({@linkcode DEFAULT_SLOW_CLIENT_TIMEOUT_MS}).
   */
  slowClientTimeoutMs?: number;
  /**
   * The clock of `slowClientTimeoutMs` and of a connection's other timers (a body that stops
   * arriving for 10 s fails, a connection whose body was left unread lingers). Default: the
   * system clock.
   */
  clock?: Clock;
  /** Where disconnected clients are reported. Default: nowhere. */
  logger?: Logger;
  /**
   * Largest request body read for the handler (which has its own, smaller limits: the
   * inspector's `maxUploadBytes` for a file the machine page uploads, `maxBodyBytes` for JSON).
   * Default 8 MiB ({@linkcode DEFAULT_MAX_REQUEST_BYTES}).
   */
  maxRequestBytes?: number;
  /**
   * How long a connection may take to send its first request's headers; past it the connection
   * is closed (bytes trickling in do not extend it), as on the harness's server. Default 10 s.
   */
  handshakeTimeoutMs?: number;
  /**
   * Most connections open at once; one beyond is closed as it arrives (a browser keeps a few,
   * and one per open page stream). Default 256.
   */
  maxConnections?: number;
}

/** The default of {@linkcode ServeInspectorOptions.maxConnections}. */
export const DEFAULT_MAX_INSPECTOR_CONNECTIONS = 256;

/** A listening inspector server. */
export interface InspectorServer {
  /** Its base URL, `http://127.0.0.1:<port>` (hand browsers `inspector.loginUrl(url)`). */
  readonly url: string;
  /** Stops listening and ends every connection. */
  close(): Promise<void>;
  /** Closes it as `close` does: `await using server = await serveInspector(ui)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The default of {@linkcode ServeInspectorOptions.maxRequestBytes}: 8 MiB. */
export const DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024;

/** Serves `handler` (an {@linkcode Inspector} or a fetch function) on 127.0.0.1 only. */
export function serveInspector(
  handler: Inspector | ((request: Request) => Promise<Response>),
  options: ServeInspectorOptions = {},
): Promise<InspectorServer> {
  const fetch = typeof handler === "function" ? handler : handler.fetch;
  const hosts = servedHosts(options.allowedHosts);
  const bridge: FetchBridge = {
    maxRequestBytes: options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES,
    // A body the handler reads must keep arriving, as on the harness's server.
    bodyTimeoutMs: DEFAULT_HANDSHAKE_TIMEOUT_MS,
    slowClientTimeoutMs: options.slowClientTimeoutMs ?? DEFAULT_SLOW_CLIENT_TIMEOUT_MS,
    clock: options.clock ?? systemClock,
    logger: options.logger ?? silentLogger,
  };
  const handshakeMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const server = createServer((req, res) => {
    handshakeDone(req.socket);
    const url = requestedUrl(req.url ?? "/", req.headers.host, hosts);
    if (url instanceof URL) void answerRequest(req, res, url, fetch, bridge);
    else void sendAnswer(req, res, refusal(url[0], url[1]), bridge);
  });
  server.maxConnections = options.maxConnections ?? DEFAULT_MAX_INSPECTOR_CONNECTIONS;
  server.on("connection", (socket) => awaitHandshake(socket, handshakeMs));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      const { port } = server.address() as AddressInfo;
      const close = () =>
        new Promise<void>((done) => {
          server.close(() => done());
          server.closeAllConnections();
        });
      resolve({ url: `http://127.0.0.1:${port}`, close, [Symbol.asyncDispose]: close });
    });
  });
}

/** A plain-text refusal before any handler runs (a host it does not serve, a malformed one). */
function refusal(status: number, text: string): Response {
  return new Response(`${text}\n`, {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
}
