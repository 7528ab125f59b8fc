/**
 * The harness with Deno's own WebSocket server (`transport/deno.ts`) as its default server
 * factory. On Deno, `harness/node.ts` (the `ws` server) works as well.
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/deno.ts";
import { Harness as CoreHarness, type HarnessOptions } from "./harness.ts";

export * from "./mod.ts";

/**
 * A {@linkcode CoreHarness} whose `serve` / `serveUnix` / `dial` use Deno's server and client
 * unless `server` / `dial` are given.
 */
export class Harness extends CoreHarness {
  constructor(options: HarnessOptions = {}) {
    super({ server: serveWebSocket, dial: dialWebSocket, ...options });
  }
}
