/**
 * The executor end preconfigured for Deno: `ExecutorClient` dials and `listen`s with
 * Deno's own WebSocket client and `Deno.serve` (`transport/deno.ts`; Unix-socket dials go
 * through the `ws` package, which Deno's native client cannot do). On Deno, `executor/node.ts` (the `ws` package) works as well.
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/deno.ts";
import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";

export * from "./mod.ts";

/** {@linkcode PortableExecutorClient} with Deno's WebSocket dialer and server as its defaults. */
export class ExecutorClient extends PortableExecutorClient {
  constructor(options: ExecutorClientOptions) {
    super({ dial: dialWebSocket, server: serveWebSocket, ...options });
  }
}
