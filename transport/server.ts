/**
 * The runtime-neutral shape of a WebSocket server: each runtime adapter (`node.ts`, `deno.ts`,
 * `bun.ts`) serves upgrades and plain HTTP with it, so the harness is written once.
 */
import type { Transport } from "./transport.ts";

/** The decision on one upgrade request. */
export type UpgradeDecision =
  | {
    accept: true;
    protocol: string;
    onOpen: (transport: Transport) => void;
    /**
     * Called instead of `onOpen` when the accepted upgrade never opens: the runtime's WebSocket
     * code refused the request (no valid `Sec-WebSocket-Key`, a `POST`, `Upgrade: h2c`), or the
     * peer left before the 101. Every runtime's server calls one of the two, once, so what an
     * acceptance reserved (a listening executor's one connection) is given back.
     */
    onAbandoned?: () => void;
  }
  | { accept: false; response: Response };

/**
 * The default time a connection has, from the moment it is accepted, to complete its request:
 * the headers of an HTTP request, or an upgrade's headers and its decision (`upgrade`) until the
 * 101 response is out. A connection that has not by then is closed: 10 s.
 */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;

/** Options of a runtime's `serveWebSocket`. */
export interface ServeWebSocketOptions {
  /** TCP host to bind. Default 127.0.0.1 (never all interfaces unless asked). */
  hostname?: string;
  /** TCP port; 0 picks a free one. Default 0. */
  port?: number;
  /** A Unix socket path or `\\.\pipe\name`; replaces hostname/port. */
  path?: string;
  /** Frames over this many bytes close the connection with 1009. */
  maxFrameBytes?: number;
  /**
   * A connection whose request is not complete this long after it was accepted is closed
   * (see {@linkcode DEFAULT_HANDSHAKE_TIMEOUT_MS}, the default). Servers built on `node:http`
   * (`transport/node.ts`, on Node, Deno and Bun) honour it; `Bun.serve` closes an incomplete
   * request after about 10 s on its own, and `Deno.serve` offers no hook before a request is
   * complete (see `transport/bun.ts`, `transport/deno.ts`). The `node:http` servers also drop a
   * connection they closed whose peer has not answered the close frame within this long (at
   * most 2 s).
   */
  handshakeTimeoutMs?: number;
  /** Decides on a WebSocket upgrade (authenticate, pick a subprotocol from `protocols`). */
  upgrade(request: Request, protocols: string[]): Promise<UpgradeDecision>;
  /** Serves plain HTTP requests (token endpoint, brain API). Default: 404. */
  fetch?(request: Request): Promise<Response>;
  /**
   * Answers a request that names no URL ({@linkcode malformedRequest}: a malformed `Host`
   * header or target), before `fetch` or `upgrade` sees it: a 400, which the harness writes with
   * its faces' error body. Default: a plain-text 400.
   */
  badRequest?(reason: string): Response;
}

/** A running server. */
export interface RunningServer {
  /** `ws://host:port` or `unix:///path.sock`. */
  readonly url: string;
  /** `http://host:port`, or the `unix://` URL for a socket. */
  readonly httpUrl: string;
  /** Stops listening and closes every connection with 1001. */
  close(): Promise<void>;
}

/**
 * `server` with `Symbol.asyncDispose`, closing it as `close` does: what each runtime's
 * `serveWebSocket` returns, so that `await using server = await serveWebSocket(…)` closes it.
 */
export function disposableServer(server: RunningServer): RunningServer & AsyncDisposable {
  const close = () => server.close();
  return { url: server.url, httpUrl: server.httpUrl, close, [Symbol.asyncDispose]: close };
}

/** Starts a WebSocket server (one implementation per runtime). */
export type WebSocketServe = (options: ServeWebSocketOptions) => Promise<RunningServer>;

/** The subprotocols a client offered, from its `sec-websocket-protocol` header. */
export function offeredProtocols(request: Request): string[] {
  return (request.headers.get("sec-websocket-protocol") ?? "").split(",").map((p) => p.trim())
    .filter(Boolean);
}

/** Whether a request asks for a WebSocket upgrade. */
export function isUpgradeRequest(request: Request): boolean {
  return request.headers.get("upgrade")?.toLowerCase() === "websocket";
}

/**
 * The shape of a `Host` header (RFC 9110 7.2, `uri-host [ ":" port ]`): an IP literal or a name
 * of unreserved, sub-delimiter and percent-encoded characters. Whether the URL parser accepts
 * what is left (an IPv4 address in range, a port up to 65535) is checked apart.
 */
const HOST_SHAPE = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~!$&'()*+,;=%]+)(?::[0-9]*)?$/;

/**
 * Why a `Host` header (`null` when absent, as HTTP/1.0 allows) is not a host and port, or
 * `undefined` when it is one.
 */
export function malformedHost(host: string | null): string | undefined {
  if (host === null || (HOST_SHAPE.test(host) && parses(`http://${host}/`))) return undefined;
  return "malformed Host header";
}

/**
 * Why a request names no URL, or `undefined` when it does: a malformed `host` header
 * ({@linkcode malformedHost}), or a `url` (what the server built of the target and the host)
 * that does not parse. Every runtime's server asks it before anything else, so that such a
 * request is a 400 wherever it arrives, not a failure of whatever parses its URL first
 * (`Deno.serve` and `Bun.serve` hand over a `Request` whose `url` does not parse, and a `Host`
 * such as `a/b` or `a?b` would move the path the handlers route on).
 */
export function malformedRequest(host: string | null, url: string): string | undefined {
  return malformedHost(host) ?? (parses(url) ? undefined : "malformed request target");
}

function parses(url: string): boolean {
  try {
    new URL(url);
    return true;
  } catch {
    return false;
  }
}

/** The answer to a request {@linkcode malformedRequest} refused: `options.badRequest`'s. */
export function badRequestAnswer(
  options: Pick<ServeWebSocketOptions, "badRequest">,
  reason: string,
): Response {
  return options.badRequest?.(reason) ??
    new Response(`${reason}\n`, {
      status: 400,
      headers: { "content-type": "text/plain; charset=utf-8" },
    });
}

/**
 * Decides on `request` as a `fetch`-style server (`Deno.serve`, `Bun.serve`) must before it
 * upgrades: a malformed request is refused with `options.badRequest`'s 400, plain HTTP is
 * answered by `options.fetch` (404 without one), an upgrade is decided
 * by `options.upgrade` with the subprotocols offered, and one whose decision throws is refused
 * with 500. The server upgrades on an accepting decision and answers with a refusing one's
 * response.
 */
export async function decideRequest(
  request: Request,
  options: Pick<ServeWebSocketOptions, "fetch" | "upgrade" | "badRequest">,
): Promise<UpgradeDecision> {
  const malformed = malformedRequest(request.headers.get("host"), request.url);
  if (malformed) return { accept: false, response: badRequestAnswer(options, malformed) };
  if (!isUpgradeRequest(request)) {
    const response = options.fetch
      ? await options.fetch(request)
      : new Response("not found", { status: 404 });
    return { accept: false, response };
  }
  try {
    return await options.upgrade(request, offeredProtocols(request));
  } catch {
    return { accept: false, response: new Response("internal error", { status: 500 }) };
  }
}

/**
 * Closes every transport of `open` with 1001 and waits for their close handshakes, a second at
 * the most: what a server's `close` does before it stops listening.
 */
export async function closeAll(open: ReadonlySet<Transport>): Promise<void> {
  for (const transport of open) transport.close(1001, "server shutting down");
  await Promise.race([
    Promise.all([...open].map((t) => t.closed)),
    new Promise((r) => setTimeout(r, 1000)),
  ]);
}

/** Whether a URL names a local socket (`unix:///path.sock` or a Windows named pipe). */
export function isLocalSocketUrl(url: string): boolean {
  return url.startsWith("unix:") || url.startsWith("\\\\.\\pipe\\") || url.startsWith("pipe:");
}

/** The socket path of a `unix:///path.sock` URL, or a named pipe path as given. */
export function localSocketPath(url: string): string {
  if (url.startsWith("\\\\.\\pipe\\")) return url;
  if (url.startsWith("pipe:")) return `\\\\.\\pipe\\${url.replace(/^pipe:\/*/, "")}`;
  return decodeURIComponent(url.replace(/^unix:(\/\/)?/, ""));
}

/** Whether a path is a Windows named pipe. */
export function isNamedPipe(path: string): boolean {
  return path.startsWith("\\\\.\\pipe\\");
}
