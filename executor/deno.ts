/**
 * The executor end preconfigured for Deno: `ExecutorClient` dials with the byte-stream client
 * over Deno's `node:net` (`wss://` with the `ws` package; Deno's native client leaves Nagle's
 * algorithm on and refuses `ws+unix`, see `transport/deno.ts`) and `listen`s with `Deno.serve`.
 * On Deno, `executor/node.ts` (the same dialer, `ws` to listen) works as well.
 * Artifacts of an executor that dialed `unix:///path.sock` are uploaded to that harness through
 * the same socket (`transport/http-socket.node.ts`).
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/deno.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";

export * from "./mod.ts";

/** {@linkcode PortableExecutorClient} with Deno's WebSocket dialer and server as its defaults. */
export class ExecutorClient extends PortableExecutorClient {
  /** A client with Deno's transports unless `dial` / `server` are given. */
  constructor(options: ExecutorClientOptions) {
    super({
      dial: dialWebSocket,
      server: serveWebSocket,
      socketFetch: fetchOverSocket,
      ...options,
    });
  }
}
