/**
 * The executor end preconfigured for Cloudflare Workers: `ExecutorClient` dials with `fetch`
 * and `Upgrade: websocket` (`transport/workers.ts`). A Worker cannot listen on a socket, so
 * `listen()` is unavailable there.
 *
 * @module
 */
import { dialWebSocket } from "../transport/workers.ts";
import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";

export * from "./mod.ts";

/** {@linkcode PortableExecutorClient} with the Workers WebSocket dialer as its default. */
export class ExecutorClient extends PortableExecutorClient {
  /** A client dialing with the Workers `fetch` upgrade unless `dial` is given. */
  constructor(options: ExecutorClientOptions) {
    super({ dial: dialWebSocket, ...options });
  }
}
