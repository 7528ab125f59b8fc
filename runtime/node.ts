/**
 * Node's {@linkcode Runtime} record, which the `bma-executor-sdk/node` entry points (`node.ts`,
 * `executor/node.ts`, `harness/node.ts`) hand to the portable classes: WebSockets dialed with
 * the byte-stream client over `node:net` (`wss://` with the `ws` package) and served with
 * Node's `http` server and `ws`, uploads over a Unix socket with `node:http`, terminals through
 * `@lydell/node-pty`, SQLite stores over `libsql`. Deno and Bun run all of it as well.
 *
 * @module
 */
import { nodePty } from "../executor/machine/pty.node.ts";
import { processHolderIdentity } from "../harness/store/holder.node.ts";
import type { SqlHarnessStore } from "../harness/store/sql.ts";
import { openSqliteStore as openOnBun } from "../harness/store/sqlite.bun.ts";
import { openSqliteStore as openOnDeno } from "../harness/store/sqlite.deno.ts";
import {
  type NodeSqliteStoreOptions,
  openSqliteStore as openOnNode,
} from "../harness/store/sqlite.node.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { dialWebSocket, serveWebSocket } from "../transport/node.ts";
import type { Runtime } from "./runtime.ts";

/**
 * Opens (or creates) the SQLite file at `path` as a harness store (every method answers
 * synchronously; `close()` it when done). The driver is `options.driver` when given; otherwise
 * the runtime's own, as its entry point chooses it: `libsql` on Node (`npm install libsql`),
 * the built-in `node:sqlite` on Deno, the built-in `bun:sqlite` on Bun.
 *
 * ```ts
 * import { openSqliteStore } from "bma-executor-sdk/node";
 * const store = await openSqliteStore("./harness.db");
 * ```
 */
export function openSqliteStore(
  path: string,
  options: NodeSqliteStoreOptions = {},
): Promise<SqlHarnessStore> {
  const { driver, ...rest } = options;
  if (driver === undefined) {
    if ("Bun" in globalThis) return openOnBun(path, rest);
    if ("Deno" in globalThis) return openOnDeno(path, rest);
  }
  return openOnNode(path, options);
}

/** Node's pieces (the `node:` ones also serve `bma-executor-sdk/node` on Deno and Bun). */
export const nodeRuntime: Runtime = {
  name: "node",
  dial: dialWebSocket,
  serve: serveWebSocket,
  socketFetch: fetchOverSocket,
  pty: nodePty,
  holderIdentity: processHolderIdentity,
  openSqliteStore,
};
