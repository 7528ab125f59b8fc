/**
 * The harness with Bun's own WebSocket server (`transport/bun.ts`) as its default server
 * factory. On Bun, `harness/node.ts` (the `ws` server) works as well.
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/bun.ts";
import { Harness as CoreHarness, type HarnessOptions } from "./harness.ts";
import { processHolderIdentity } from "./store/holder.node.ts";

export * from "./mod.ts";
export {
  type InspectorServer,
  serveInspector,
  type ServeInspectorOptions,
} from "./inspector/serve.node.ts";

/**
 * A {@linkcode CoreHarness} whose `serve` / `serveUnix` / `dial` use Bun's server and client
 * unless `server` / `dial` are given.
 */
export class Harness extends CoreHarness {
  /** A harness with Bun's server and dialer unless `server` / `dial` are given. */
  constructor(options: HarnessOptions = {}) {
    super({
      server: serveWebSocket,
      dial: dialWebSocket,
      holderIdentity: processHolderIdentity(),
      ...options,
    });
  }
}
