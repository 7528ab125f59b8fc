/**
 * HTTP over a local socket (a Unix socket path, or a Windows named pipe) with `node:http`, which
 * Node, Deno and Bun all run: how an executor that dialed a harness at `unix:///path.sock`
 * reaches the same harness's HTTP side (artifact uploads). Web-standard `Request` in,
 * `Response` out.
 */
import { type ClientRequest, request as httpRequest } from "node:http";

/** The largest response body read: the artifact endpoint answers a few hundred bytes. */
const MAX_RESPONSE_BYTES = 1024 * 1024;
const NO_BODY = new Set([204, 205, 304]);

/**
 * Sends `request` to the HTTP server listening on `socketPath` and resolves with its response
 * (its body read whole, at most 1 MiB). The request URL gives the path, query and host header;
 * its origin is otherwise ignored. Rejects on a socket error or when `request.signal` aborts.
 */
export async function fetchOverSocket(socketPath: string, request: Request): Promise<Response> {
  const url = new URL(request.url);
  const headers: Record<string, string> = { host: url.host || "localhost" };
  request.headers.forEach((value, key) => (headers[key] = value));
  // The body is sent as it is read (chunked), never held whole: an artifact may be a spooled
  // file of up to a GiB.
  const body = request.body;
  if (body && headers["content-length"] === undefined) headers["transfer-encoding"] = "chunked";
  const signal = request.signal;
  // A server may answer before it read the body (401, 404, 503): then the rest is not sent.
  const answered = new AbortController();
  let sent = !body;
  return await new Promise<Response>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const outgoing = httpRequest(
      { socketPath, method: request.method, path: `${url.pathname}${url.search}`, headers },
      (incoming) => {
        answered.abort();
        const chunks: Uint8Array[] = [];
        let size = 0;
        incoming.on("data", (chunk: Uint8Array) => {
          size += chunk.byteLength;
          if (size > MAX_RESPONSE_BYTES) {
            outgoing.destroy(new Error("response over 1 MiB"));
            return;
          }
          chunks.push(chunk);
        });
        incoming.on("error", reject);
        incoming.on("end", () => {
          // The answer came with the body unsent: the connection cannot be used again.
          if (!sent) outgoing.destroy();
          const responseHeaders = new Headers();
          for (const [key, value] of Object.entries(incoming.headers)) {
            if (Array.isArray(value)) { for (const v of value) responseHeaders.append(key, v); }
            else if (value !== undefined) responseHeaders.set(key, value);
          }
          const status = incoming.statusCode ?? 0;
          if (status < 200 || status > 599) {
            reject(new Error(`unexpected HTTP status ${status}`));
            return;
          }
          const bytes = new Uint8Array(size);
          let at = 0;
          for (const chunk of chunks) {
            bytes.set(chunk, at);
            at += chunk.byteLength;
          }
          resolve(
            new Response(NO_BODY.has(status) ? null : bytes, {
              status,
              statusText: incoming.statusMessage ?? "",
              headers: responseHeaders,
            }),
          );
        });
      },
    );
    const onAbort = () =>
      outgoing.destroy(signal.reason instanceof Error ? signal.reason : undefined);
    signal?.addEventListener("abort", onAbort, { once: true });
    outgoing.on("error", (error) => {
      signal?.removeEventListener("abort", onAbort);
      reject(signal?.aborted ? signal.reason : error);
    });
    outgoing.on("close", () => signal?.removeEventListener("abort", onAbort));
    if (body) {
      void sendBody(body, outgoing, answered.signal).then((whole) => (sent = whole));
    } else outgoing.end();
  });
}

/**
 * Writes `body` to `outgoing` as it is read, waiting for the socket to drain between chunks;
 * resolves with whether all of it was sent. It stops, and cancels the body, when the request
 * ends (destroyed, aborted) or `answered` aborts (the server answered without reading on).
 */
async function sendBody(
  body: ReadableStream<Uint8Array>,
  outgoing: ClientRequest,
  answered: AbortSignal,
): Promise<boolean> {
  const reader = body.getReader();
  const stop = () => void reader.cancel().catch(() => {});
  outgoing.once("close", stop);
  answered.addEventListener("abort", stop, { once: true });
  const ended = () => outgoing.destroyed || answered.aborted;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (ended()) return false;
      if (done) {
        outgoing.end();
        return true;
      }
      if (!outgoing.write(value)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            outgoing.off("drain", go);
            outgoing.off("close", go);
            answered.removeEventListener("abort", go);
            resolve();
          };
          outgoing.on("drain", go);
          outgoing.on("close", go);
          answered.addEventListener("abort", go, { once: true });
        });
        if (ended()) return false;
      }
    }
  } catch (error) {
    // The body could not be read: the request is cut rather than sent short.
    if (!ended()) outgoing.destroy(error instanceof Error ? error : new Error(String(error)));
    return false;
  } finally {
    outgoing.off("close", stop);
    answered.removeEventListener("abort", stop);
    if (ended()) stop();
  }
}
