/**
 * Serves an inspector (or any web-standard handler) with `node:http` on 127.0.0.1: Node, and
 * Deno and Bun through their Node compatibility. Response bodies are streamed as they are
 * produced (the page's live updates are a stream that never ends on its own), a client that
 * goes away aborts its request's signal and cancels its stream, and `close` ends every
 * connection, streams included.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Inspector } from "./inspector.ts";
import { concatBytes } from "../../transport/bytes.ts";

/** Options of {@linkcode serveInspector}. */
export interface ServeInspectorOptions {
  /** The port on 127.0.0.1. Default 0 (a free one). */
  port?: number;
}

/** A listening inspector server. */
export interface InspectorServer {
  /** Its base URL, `http://127.0.0.1:<port>` (hand browsers `inspector.loginUrl(url)`). */
  readonly url: string;
  /** Stops listening and ends every connection. */
  close(): Promise<void>;
}

/** Largest request body read (the handler has its own, smaller limit): 8 MiB. */
const MAX_REQUEST_BYTES = 8 * 1024 * 1024;

/** Serves `handler` (an {@linkcode Inspector} or a fetch function) on 127.0.0.1 only. */
export function serveInspector(
  handler: Inspector | ((request: Request) => Promise<Response>),
  options: ServeInspectorOptions = {},
): Promise<InspectorServer> {
  const fetch = typeof handler === "function" ? handler : handler.fetch;
  const server = createServer((req, res) => void answer(req, res, fetch));
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      server.off("error", reject);
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

async function answer(
  req: IncomingMessage,
  res: ServerResponse,
  fetch: (request: Request) => Promise<Response>,
): Promise<void> {
  const aborting = new AbortController();
  res.on("close", () => aborting.abort());
  try {
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Uint8Array).byteLength;
      if (size > MAX_REQUEST_BYTES) {
        res.writeHead(413).end();
        return;
      }
      chunks.push(chunk as Uint8Array);
    }
    const headers = new Headers();
    for (const [key, value] of Object.entries(req.headers)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) headers.append(key, item);
    }
    const method = req.method ?? "GET";
    const body = method === "GET" || method === "HEAD" ? undefined : concatBytes(chunks, size);
    const request = new Request(`http://${req.headers.host ?? "127.0.0.1"}${req.url ?? "/"}`, {
      method,
      headers,
      body: body as BodyInit | undefined,
      signal: aborting.signal,
    });
    const response = await fetch(request);
    const out: Record<string, string | string[]> = {};
    response.headers.forEach((value, key) => {
      if (key === "set-cookie") return;
      out[key] = value;
    });
    const cookies = response.headers.getSetCookie();
    if (cookies.length) out["set-cookie"] = cookies;
    res.writeHead(response.status, out);
    if (!response.body || method === "HEAD") {
      // A body nobody reads (a HEAD of the live stream) is canceled, so it ends at once.
      await response.body?.cancel().catch(() => {});
      res.end();
      return;
    }
    const reader = response.body.getReader();
    aborting.signal.addEventListener("abort", () => void reader.cancel().catch(() => {}), {
      once: true,
    });
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) {
        await new Promise((resume) => {
          res.once("drain", resume);
          res.once("close", resume);
        });
      }
    }
    res.end();
  } catch {
    if (!res.headersSent) res.writeHead(500);
    res.end();
  }
}
