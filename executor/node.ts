/**
 * The executor end preconfigured for Node (and Deno and Bun through their Node compatibility):
 * `ExecutorClient` dials `ws://` and `unix:///path.sock` with the byte-stream client over
 * `node:net` (`transport/websocket-stream.node.ts`), `wss://` with the `ws` package, and
 * `listen`s with Node's `http` server and `ws`. Everything else is re-exported from the portable
 * `executor/mod.ts`.
 * Artifacts of an executor that dialed `unix:///path.sock` are uploaded to that harness through
 * the same socket (`transport/http-socket.node.ts`).
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/node.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";

export * from "./mod.ts";

/** {@linkcode PortableExecutorClient} with the Node WebSocket dialer and server as its defaults. */
export class ExecutorClient extends PortableExecutorClient {
  /** A client with Node's transports unless `dial` / `server` are given. */
  constructor(options: ExecutorClientOptions) {
    super({
      dial: dialWebSocket,
      server: serveWebSocket,
      socketFetch: fetchOverSocket,
      ...options,
    });
  }
}
