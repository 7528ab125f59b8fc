/**
 * Node's {@linkcode Runtime} record, which the `bma-executor-sdk/node` entry points (`node.ts`,
 * `executor/node.ts`, `harness/node.ts`) hand to the portable classes: WebSockets dialed with
 * the byte-stream client over `node:net` (`wss://` with the `ws` package) and served with
 * Node's `http` server and `ws`, uploads over a Unix socket with `node:http`, terminals through
 * `@lydell/node-pty`, SQLite stores over `libsql`. Deno and Bun run these pieces through their
 * Node compatibility, but each has a record of its own (`deno.ts`, `bun.ts`) with what it runs
 * better or only it has: this record knows nothing of them.
 *
 * @module
 */
import { nodePty } from "../executor/machine/pty.node.ts";
import { processHolderIdentity } from "../harness/store/holder.node.ts";
import { openSqliteStore } from "../harness/store/sqlite.node.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { dialWebSocket, serveWebSocket } from "../transport/node.ts";
import type { Runtime } from "./runtime.ts";

/** Node's pieces. */
export const nodeRuntime: Runtime = {
  name: "node",
  dial: dialWebSocket,
  serve: serveWebSocket,
  socketFetch: fetchOverSocket,
  pty: nodePty,
  holderIdentity: processHolderIdentity,
  openSqliteStore,
};
