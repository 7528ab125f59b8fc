/**
 * Deno's {@linkcode Runtime} record, which the `bma-executor-sdk/deno` entry points (`deno.ts`,
 * `executor/deno.ts`, `harness/deno.ts`) hand to the portable classes: WebSockets dialed with
 * the byte-stream client over Deno's `node:net` (`wss://` with the `ws` package; Deno's native
 * client leaves Nagle's algorithm on and refuses `ws+unix`, see `transport/deno.ts`), the
 * executor's `listen` served with `Deno.serve`, the harness's as {@linkcode serveHarness} says,
 * uploads over a Unix socket with `node:http`, terminals through `@lydell/node-pty`, SQLite
 * stores over the built-in `node:sqlite`.
 *
 * @module
 */
import { nodePty } from "../executor/machine/pty.node.ts";
import { processHolderIdentity } from "../harness/store/holder.node.ts";
import { openSqliteStore } from "../harness/store/sqlite.deno.ts";
import { dialWebSocket, serveWebSocket as serveWithDeno } from "../transport/deno.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { serveWebSocket as serveWithWs } from "../transport/node.ts";
import type { RunningServer, ServeWebSocketOptions } from "../transport/server.ts";
import type { Runtime } from "./runtime.ts";

/**
 * The harness's server on Deno: TCP with `ws` on Deno's `node:http`, Unix sockets with
 * `Deno.serve`, whichever carries a harness's frames faster (`npm run bench` measures both;
 * docs/benchmarks.md has the figures). A `Deno.upgradeWebSocket` socket writes every frame with
 * its own syscall, where the `ws` server writes all a turn sent at once (a call and the ack of
 * the previous result, for every executor's calls in flight), which matters with many calls in
 * flight over TCP. Over a Unix socket Deno's `node:net` is the slower one, so `Deno.serve`
 * keeps them. (`server: serveWebSocket` of `transport/deno.ts` serves TCP with `Deno.serve` too.)
 */
export function serveHarness(options: ServeWebSocketOptions): Promise<RunningServer> {
  return options.path ? serveWithDeno(options) : serveWithWs(options);
}

/** Deno's pieces. */
export const denoRuntime: Runtime = {
  name: "deno",
  dial: dialWebSocket,
  serve: serveWithDeno,
  serveHarness,
  socketFetch: fetchOverSocket,
  pty: nodePty,
  holderIdentity: processHolderIdentity,
  openSqliteStore,
};
