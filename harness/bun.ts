/**
 * The harness with Bun's own WebSocket server (`transport/bun.ts`) as its default server
 * factory. On Bun, `harness/node.ts` (the `ws` server) works as well.
 *
 * @module
 */
import { serveWebSocket } from "../transport/bun.ts";
import { Harness as CoreHarness, type HarnessOptions } from "./harness.ts";

export * from "./mod.ts";

/** A {@linkcode CoreHarness} whose `serve` / `serveUnix` use Bun's server unless `server` is given. */
export class Harness extends CoreHarness {
  constructor(options: HarnessOptions = {}) {
    super({ server: serveWebSocket, ...options });
  }
}
