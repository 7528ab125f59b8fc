/**
 * A web-standard handler (`Request` in, `Response` out) behind a `node:http` server: the bridge
 * of `serveInspector` (the inspector, the brain API) and of the harness's own server
 * (`transport/node.ts`: `harness.serve` on Node, and on Deno for TCP). Node, and Deno and Bun
 * through their Node compatibility.
 *
 * - The request body is a lazy, bounded web stream (`request-body.node.ts`): read only if the
 *   handler reads it, so only once the handler has authenticated the request; a `Content-Length`
 *   over the bound is refused with 413 before a byte is read; a body that stops arriving while
 *   the handler reads it fails with 408. A body left unread is never kept: a small one is dropped
 *   as it arrives, for any other the connection closes lingering.
 * - Methods a web `Request` cannot carry (`TRACE`, `TRACK`) are answered 405, not 500.
 * - Response bodies are streamed as they are produced (an event stream never ends on its own);
 *   a client that goes away aborts its request's signal and cancels its stream. A client that
 *   takes nothing of a response for `slowClientTimeoutMs` is disconnected with a reset (nginx's
 *   `send_timeout`), and so is one whose response stream failed half-way: nothing stays queued
 *   for it.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Clock } from "../../protocol/clock.ts";
import type { Logger } from "../../protocol/logger.ts";
import { concatBytes } from "../../transport/bytes.ts";
import {
  bodyLeftUnread,
  bodyStalled,
  DISCARD_BYTES,
  discardBody,
  endLingering,
  requestBodyStream,
} from "./request-body.node.ts";

/** The default of a server's slow-client timeout: 30 s. */
export const DEFAULT_SLOW_CLIENT_TIMEOUT_MS = 30_000;

/** How a server bridges its requests to a handler. */
export interface FetchBridge {
  /** Largest request body the handler may read: 413 past it (by `Content-Length` or bytes). */
  readonly maxRequestBytes: number;
  /**
   * Longest wait for the next byte of a body the handler reads (408 past it, and the connection
   * closes), and longest time a small unread body has to arrive whole to be dropped (then the
   * connection is destroyed).
   */
  readonly bodyTimeoutMs: number;
  /** How long a response may wait for its client to take more; past it the connection is reset. */
  readonly slowClientTimeoutMs: number;
  /** The clock of every timer here. */
  readonly clock: Clock;
  /** Where disconnected clients are reported. */
  readonly logger: Logger;
}

/** A web-standard request handler. */
export type FetchHandler = (request: Request) => Promise<Response>;

/**
 * Methods the web `Request` refuses to carry (the Fetch standard's forbidden methods; `CONNECT`
 * never reaches a request listener of `node:http`).
 */
const FORBIDDEN_METHODS: ReadonlySet<string> = new Set(["CONNECT", "TRACE", "TRACK"]);

/** The methods a 405 names as served. */
const SERVED_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS";

/** Answers `req` (naming `url`) with `handler`'s response, as the module comment says. */
export async function answerRequest(
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  handler: FetchHandler,
  bridge: FetchBridge,
): Promise<void> {
  const method = req.method ?? "GET";
  if (declaredLength(req) > bridge.maxRequestBytes) {
    const message = `bodies take at most ${bridge.maxRequestBytes} bytes`;
    return await sendAnswer(req, res, errorResponse(413, "payload_too_large", message), bridge);
  }
  if (FORBIDDEN_METHODS.has(method.toUpperCase())) {
    const refusal = errorResponse(405, "method_not_allowed", `${method} is not served`);
    refusal.headers.set("allow", SERVED_METHODS);
    return await sendAnswer(req, res, refusal, bridge);
  }
  const aborting = new AbortController();
  res.on("close", () => aborting.abort());
  let request: Request;
  try {
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) headers.append(key, item);
    }
    // The body is read only if the handler reads it: after it has authenticated the request.
    const body = method === "GET" || method === "HEAD" ? undefined : requestBodyStream(
      req,
      bridge.maxRequestBytes,
      { idleMs: bridge.bodyTimeoutMs, clock: bridge.clock },
    );
    // A stream body needs `duplex: "half"` (Node, Deno), which the DOM's RequestInit lacks.
    const init = { method, headers, body, signal: aborting.signal, duplex: "half" };
    request = new Request(url, init as RequestInit);
  } catch {
    // A request the web `Request` refuses (a header value it rejects) is the client's error.
    const refusal = errorResponse(400, "bad_request", "malformed request");
    return await sendAnswer(req, res, refusal, bridge, aborting.signal);
  }
  let response: Response;
  try {
    response = await handler(request);
  } catch {
    response = new Response(null, { status: 500 });
  }
  await sendAnswer(req, res, response, bridge, aborting.signal);
}

/**
 * Sends `response` to `req`: one the handler made, or a refusal made before any handler ran (a
 * malformed request). A body left unread is dropped or the connection closes lingering; the
 * body of `response` is streamed (see the module comment).
 */
export async function sendAnswer(
  req: IncomingMessage,
  res: ServerResponse,
  response: Response,
  bridge: FetchBridge,
  signal?: AbortSignal,
): Promise<void> {
  const method = req.method ?? "GET";
  try {
    const out: Record<string, string | string[]> = {};
    response.headers.forEach((value, key) => {
      if (key === "set-cookie") return;
      out[key] = value;
    });
    const cookies = response.headers.getSetCookie();
    if (cookies.length) out["set-cookie"] = cookies;
    // A body the handler left unread (a request refused before it was authenticated, or past a
    // bound) is never kept: a small one of declared length is dropped as it arrives, and the
    // connection kept; for any other the connection closes lingering (`request-body.node.ts`),
    // as it does after a body that stopped arriving.
    const declared = declaredLength(req);
    const unread = hasBody(req) && bodyLeftUnread(req);
    const droppable = unread && !bodyStalled(req) && declared > 0 && declared <= DISCARD_BYTES;
    if (droppable) discardBody(req, { idleMs: bridge.bodyTimeoutMs, clock: bridge.clock });
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
      if (linger) await endLingering(res, bridge.clock);
      else res.end();
      return;
    }
    // An event stream's headers go out at once, not with its first event: its client learns
    // that it is connected (an EventSource opens) while there is nothing to send yet.
    if (eventStream) res.flushHeaders();
    const reader = stream.getReader();
    const cancel = () => void reader.cancel().catch(() => {});
    // A client gone before the handler answered has no one to stream to.
    if (signal?.aborted || res.destroyed) cancel();
    else signal?.addEventListener("abort", cancel, { once: true });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) await taken(res, "drain", bridge);
    }
    if (linger) await endLingering(res, bridge.clock);
    else res.end();
    // An end the client does not take (the last of a stream it stopped reading) is not kept.
    if (res.writableLength > 0 && !res.writableFinished) await taken(res, "finish", bridge);
  } catch {
    if (!res.headersSent) {
      res.writeHead(500);
      res.end();
    } else if (!res.destroyed) {
      // A body that failed half-way (a stream that dropped its reader) must not look complete:
      // the connection goes, and what was queued for it too.
      bridge.logger.info("HTTP client disconnected: its response failed half-way");
      reset(res);
    }
  }
}

/** A JSON refusal of the bridge's own: `{"error": {"code", "message"}}`. */
export function errorResponse(status: number, code: string, message: string): Response {
  const body = new TextEncoder().encode(JSON.stringify({ error: { code, message } }));
  return new Response(body, {
    status,
    headers: {
      "content-type": "application/json; charset=utf-8",
      "content-length": String(body.byteLength),
    },
  });
}

/** The body length `req` declares (0 without `Content-Length`). */
function declaredLength(req: IncomingMessage): number {
  return Number(req.headers["content-length"] ?? 0) || 0;
}

/** Whether `req` carries a body at all (HTTP/1.1: a length or a transfer coding). */
function hasBody(req: IncomingMessage): boolean {
  return req.headers["transfer-encoding"] !== undefined || declaredLength(req) > 0;
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
 * `slowClientTimeoutMs` is disconnected first: it is not reading, and a connection kept for it
 * would hold what is queued until TCP gives up.
 */
function taken(res: ServerResponse, event: "drain" | "finish", bridge: FetchBridge): Promise<void> {
  return new Promise((resume) => {
    if (res.destroyed) return resume();
    const done = () => {
      bridge.clock.clearTimeout(timer);
      res.off(event, done);
      res.off("close", done);
      resume();
    };
    const timer = bridge.clock.setTimeout(() => {
      bridge.logger.info("HTTP client disconnected: it took nothing of its response", {
        waited_ms: bridge.slowClientTimeoutMs,
      });
      reset(res);
      done();
    }, bridge.slowClientTimeoutMs);
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
