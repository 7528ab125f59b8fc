/**
 * The harness with Deno's default server factory: TCP with the `ws` server on Deno's
 * `node:http`, Unix sockets with `Deno.serve` (`transport/deno.ts`). On Deno, `harness/node.ts`
 * (the `ws` server everywhere) works as well.
 *
 * @module
 */
import { dialWebSocket, serveWebSocket as serveWithDeno } from "../transport/deno.ts";
import { serveWebSocket as serveWithWs } from "../transport/node.ts";
import type { RunningServer, ServeWebSocketOptions } from "../transport/server.ts";
import { Harness as CoreHarness, type HarnessOptions } from "./harness.ts";
import { processHolderIdentity } from "./store/holder.node.ts";

export * from "./mod.ts";
export {
  type InspectorServer,
  serveInspector,
  type ServeInspectorOptions,
} from "./inspector/serve.node.ts";

/**
 * Serves TCP with `ws` and Unix sockets with `Deno.serve`, whichever carries a harness's frames
 * faster on Deno (`npm run bench` measures both; docs/benchmarks.md has the figures). A
 * `Deno.upgradeWebSocket` socket writes every frame with its own syscall, where the `ws` server
 * writes all a turn sent at once (a call and the ack of the previous result, for every
 * executor's calls in flight), which matters with many calls in flight over TCP. Over a Unix
 * socket Deno's `node:net` is the slower one, so `Deno.serve` keeps them.
 */
function serveHarness(options: ServeWebSocketOptions): Promise<RunningServer> {
  return options.path ? serveWithDeno(options) : serveWithWs(options);
}

/**
 * A {@linkcode CoreHarness} whose `serve` uses the `ws` server, `serveUnix` `Deno.serve` and
 * `dial` the byte-stream client over `node:net` (`ws` for `wss://`), unless `server` / `dial`
 * are given (`server: serveWebSocket` of `transport/deno.ts` serves TCP with `Deno.serve` too).
 */
export class Harness extends CoreHarness {
  /** A harness with Deno's servers and dialer unless `server` / `dial` are given. */
  constructor(options: HarnessOptions = {}) {
    super({
      server: serveHarness,
      dial: dialWebSocket,
      holderIdentity: processHolderIdentity(),
      ...options,
    });
  }
}
