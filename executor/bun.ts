/**
 * The executor end preconfigured for Bun: `ExecutorClient` dials with the byte-stream client over
 * `Bun.connect` (`ws://`, Unix sockets; `wss://` with Bun's own client) and `listen`s with
 * `Bun.serve` (`transport/bun.ts`). On Bun, `executor/node.ts` (`node:net` and `ws`) works as well.
 * Artifacts of an executor that dialed `unix:///path.sock` are uploaded to that harness through
 * the same socket (`transport/http-socket.node.ts`).
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/bun.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";

export * from "./mod.ts";

/** {@linkcode PortableExecutorClient} with Bun's WebSocket dialer and server as its defaults. */
export class ExecutorClient extends PortableExecutorClient {
  /** A client with Bun's transports unless `dial` / `server` are given. */
  constructor(options: ExecutorClientOptions) {
    super({
      dial: dialWebSocket,
      server: serveWebSocket,
      socketFetch: fetchOverSocket,
      ...options,
    });
  }
}
