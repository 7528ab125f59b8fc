/**
 * Serves an inspector (or any web-standard handler) with `node:http` on 127.0.0.1: Node, and
 * Deno and Bun through their Node compatibility. Response bodies are streamed as they are
 * produced (the page's live updates are a stream that never ends on its own), a client that
 * goes away aborts its request's signal and cancels its stream, and `close` ends every
 * connection, streams included. A client that takes nothing of a response for
 * `slowClientTimeoutMs` is disconnected (nginx's `send_timeout`), and so is one whose response
 * stream failed: nothing stays queued for it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type Clock, systemClock } from "../../protocol/clock.ts";
import { type Logger, silentLogger } from "../../protocol/logger.ts";
import { requestedUrl, servedHosts } from "../shared/host-origin.ts";
import { JsonBodyError } from "../shared/json-body.ts";
import {
  bodyLeftUnread,
  DISCARD_BYTES,
  discardBody,
  endLingering,
  requestBodyStream,
} from "../shared/request-body.node.ts";
import { concatBytes } from "../../transport/bytes.ts";
import type { Inspector } from "./inspector.ts";

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
  /** The clock of `slowClientTimeoutMs`. Default: the system clock. */
  clock?: Clock;
  /** Where disconnected clients are reported. Default: nowhere. */
  logger?: Logger;
  /**
   * Largest request body read for the handler (which has its own, smaller limits: the
   * inspector's `maxUploadBytes` for a file the machine page uploads, `maxBodyBytes` for JSON).
   * Default 8 MiB ({@linkcode DEFAULT_MAX_REQUEST_BYTES}).
   */
  maxRequestBytes?: number;
}

/** A listening inspector server. */
export interface InspectorServer {
  /** Its base URL, `http://127.0.0.1:<port>` (hand browsers `inspector.loginUrl(url)`). */
  readonly url: string;
  /** Stops listening and ends every connection. */
  close(): Promise<void>;
  /** Closes it as `close` does: `await using server = await serveInspector(ui)`. */
  [Symbol.asyncDispose](): Promise<void>;
}

/** The default of {@linkcode ServeInspectorOptions.slowClientTimeoutMs}: 30 s. */
export const DEFAULT_SLOW_CLIENT_TIMEOUT_MS = 30_000;

/** The default of {@linkcode ServeInspectorOptions.maxRequestBytes}: 8 MiB. */
export const DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024;

/** Serves `handler` (an {@linkcode Inspector} or a fetch function) on 127.0.0.1 only. */
export function serveInspector(
  handler: Inspector | ((request: Request) => Promise<Response>),
  options: ServeInspectorOptions = {},
): Promise<InspectorServer> {
  const fetch = typeof handler === "function" ? handler : handler.fetch;
  const hosts = servedHosts(options.allowedHosts);
  const slow: SlowClients = {
    timeoutMs: options.slowClientTimeoutMs ?? DEFAULT_SLOW_CLIENT_TIMEOUT_MS,
    clock: options.clock ?? systemClock,
    logger: options.logger ?? silentLogger,
  };
  const maxRequestBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES;
  const server = createServer((req, res) =>
    void answer(req, res, fetch, hosts, slow, maxRequestBytes)
  );
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

/** How clients that stop reading are found out (internal). */
interface SlowClients {
  readonly timeoutMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
}

/**
 * A plain answer: malformed requests and refusals, before any handler runs. A body left unread
 * closes the connection lingering (`request-body.node.ts`).
 */
async function refuse(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  text: string,
  slow: SlowClients,
  json = false,
): Promise<void> {
  const body = new TextEncoder().encode(json ? text : `${text}\n`);
  res.writeHead(status, {
    "content-type": json ? "application/json; charset=utf-8" : "text/plain; charset=utf-8",
    "content-length": String(body.byteLength),
    connection: "close",
  });
  res.write(body);
  if (bodyLeftUnread(req)) await endLingering(res, slow.clock);
  else res.end();
}

async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  fetch: (request: Request) => Promise<Response>,
  hosts: ReadonlySet<string>,
  slow: SlowClients,
  maxRequestBytes: number,
): Promise<void> {
  const url = requestedUrl(req.url ?? "/", req.headers.host, hosts);
  if (!(url instanceof URL)) return await refuse(req, res, url[0], url[1], slow);
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > maxRequestBytes) {
    const error = new JsonBodyError(413, `bodies take at most ${maxRequestBytes} bytes`);
    const body = { error: { code: "payload_too_large", message: error.message } };
    return await refuse(req, res, 413, JSON.stringify(body), slow, true);
  }
  const aborting = new AbortController();
  res.on("close", () => aborting.abort());
  try {
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) headers.append(key, item);
    }
    const method = req.method ?? "GET";
    // The body is read only if the handler reads it: after it has authenticated the request.
    const body = method === "GET" || method === "HEAD"
      ? undefined
      : requestBodyStream(req, maxRequestBytes);
    // A stream body needs `duplex: "half"` (Node, Deno), which the DOM's RequestInit lacks.
    const init = { method, headers, body, signal: aborting.signal, duplex: "half" };
    const request = new Request(url, init as RequestInit);
    const response = await fetch(request);
    const out: Record<string, string | string[]> = {};
    response.headers.forEach((value, key) => {
      if (key === "set-cookie") return;
      out[key] = value;
    });
    const cookies = response.headers.getSetCookie();
    if (cookies.length) out["set-cookie"] = cookies;
    // A body the handler left unread (a request refused before it was authenticated, or past a
    // bound) is never kept: a small one of declared length is dropped as it arrives, and the
    // connection kept; for any other the connection closes lingering (`request-body.node.ts`).
    const unread = body !== undefined && bodyLeftUnread(req);
    const droppable = unread && declared > 0 && declared <= DISCARD_BYTES;
    if (droppable) discardBody(req);
    else if (unread) out.connection = "close";
    const linger = unread && !droppable;
    // A short answer (a refusal) goes out with its length: the client has it whole at once,
    // while the connection lingers.
    const eventStream = /^text\/event-stream/i.test(response.headers.get("content-type") ?? "");
    const { whole, stream } = linger && method !== "HEAD" && !eventStream
      ? await shortBody(response.body)
      : { whole: undefined, stream: response.body };
    if (whole) out["content-length"] = String(whole.byteLength);
    res.writeHead(response.status, out);
    if (!stream || method === "HEAD") {
      // A body nobody reads (a HEAD of the live stream) is canceled, so it ends at once.
      await stream?.cancel().catch(() => {});
      if (whole) res.write(whole);
      if (linger) await endLingering(res, slow.clock);
      else res.end();
      return;
    }
    // An event stream's headers go out at once, not with its first event: its client learns
    // that it is connected (an EventSource opens) while there is nothing to send yet.
    if (eventStream) res.flushHeaders();
    const reader = stream.getReader();
    aborting.signal.addEventListener("abort", () => void reader.cancel().catch(() => {}), {
      once: true,
    });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) await taken(res, "drain", slow);
    }
    if (linger) await endLingering(res, slow.clock);
    else res.end();
    // An end the client does not take (the last of a stream it stopped reading) is not kept.
    if (res.writableLength > 0 && !res.writableFinished) await taken(res, "finish", slow);
  } catch {
    if (!res.headersSent) {
      res.writeHead(500);
      res.end();
    } else if (!res.destroyed) {
      // A body that failed half-way (a stream that dropped its reader) must not look complete:
      // the connection goes, and what was queued for it too.
      slow.logger.info("HTTP client disconnected: its response failed half-way");
      reset(res);
    }
  }
}

/** Most bytes of an answer to an unread body sent with its length (a refusal is shorter). */
const SHORT_BODY_BYTES = 64 * 1024;

/**
 * A body whole when it is short (a refusal's), else as a stream again (what was read of it back
 * in front).
 */
async function shortBody(
  body: ReadableStream<Uint8Array> | null,
): Promise<{ whole?: Uint8Array; stream?: ReadableStream<Uint8Array> }> {
  if (!body) return {};
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size <= SHORT_BODY_BYTES) {
    const { done, value } = await reader.read();
    if (done) return { whole: concatBytes(chunks, size) };
    chunks.push(value);
    size += value.byteLength;
  }
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
    },
    async pull(controller) {
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return { stream };
}

/**
 * Resolves once `res` took what it was given (`event`: `drain` after a write, `finish` after
 * the end), or has closed: one listener each, removed after. A client that takes nothing for
 * `slow.timeoutMs` is disconnected first: it is not reading, and a connection kept for it would
 * hold what is queued until TCP gives up.
 */
function taken(res: ServerResponse, event: "drain" | "finish", slow: SlowClients): Promise<void> {
  return new Promise((resume) => {
    if (res.destroyed) return resume();
    const done = () => {
      slow.clock.clearTimeout(timer);
      res.off(event, done);
      res.off("close", done);
      resume();
    };
    const timer = slow.clock.setTimeout(() => {
      slow.logger.info("HTTP client disconnected: it took nothing of its response", {
        waited_ms: slow.timeoutMs,
      });
      reset(res);
      done();
    }, slow.timeoutMs);
    res.on(event, done);
    res.on("close", done);
  });
}

/**
 * Ends the connection of `res` with a reset (RST): the bytes queued for it, in this process and
 * in the kernel, are discarded at once, where a plain close would leave the kernel sending them
 * to a client that reads nothing. Falls back to destroying the socket where a reset is not
 * available.
 */
function reset(res: ServerResponse): void {
  const socket = res.socket;
  if (!socket || socket.destroyed) return void res.destroy();
  try {
    socket.resetAndDestroy();
  } catch {
    // Not a TCP socket, or one already closing: destroying it frees what it holds here.
    socket.destroy();
  }
}
