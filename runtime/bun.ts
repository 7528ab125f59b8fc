/**
 * Bun's {@linkcode Runtime} record, which the `bma-executor-sdk/bun` entry points (`bun.ts`,
 * `executor/bun.ts`, `harness/bun.ts`) hand to the portable classes: WebSockets dialed with the
 * byte-stream client over `Bun.connect` (`wss://` with Bun's own client) and served with
 * `Bun.serve` (`transport/bun.ts`), uploads over a Unix socket with `node:http`, terminals
 * through `Bun.spawn({ terminal })`, SQLite stores over the built-in `bun:sqlite`.
 *
 * @module
 */
import { bunPty } from "../executor/machine/pty.bun.ts";
import { processHolderIdentity } from "../harness/store/holder.node.ts";
import { openSqliteStore } from "../harness/store/sqlite.bun.ts";
import { dialWebSocket, serveWebSocket } from "../transport/bun.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import type { Runtime } from "./runtime.ts";

/** Bun's pieces. */
export const bunRuntime: Runtime = {
  name: "bun",
  dial: dialWebSocket,
  serve: serveWebSocket,
  socketFetch: fetchOverSocket,
  pty: bunPty,
  holderIdentity: processHolderIdentity,
  openSqliteStore,
};
