/**
 * The harness with Deno's own WebSocket server (`transport/deno.ts`) as its default server
 * factory. On Deno, `harness/node.ts` (the `ws` server) works as well.
 *
 * @module
 */
import { serveWebSocket } from "../transport/deno.ts";
import { Harness as CoreHarness, type HarnessOptions } from "./harness.ts";

export * from "./mod.ts";

/** A {@linkcode CoreHarness} whose `serve` / `serveUnix` use Deno's server unless `server` is given. */
export class Harness extends CoreHarness {
  constructor(options: HarnessOptions = {}) {
    super({ server: serveWebSocket, ...options });
  }
}
