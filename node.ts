/**
 * bma-executor-sdk for Node: the whole public API of `mod.ts`, with Node's transports injected.
 * `ExecutorClient` and `Harness` dial `ws://` and Unix sockets (`unix:///path.sock`) with the
 * byte-stream client over `node:net` and `wss://` with the `ws` package, and serve (`listen`)
 * with Node's `http` server and `ws` (all of it also runs on Deno and Bun).
 * Windows named pipes (`\\.\pipe\name`) take the same `node:net` code path as Unix sockets
 * (untested here: nothing runs Windows; the Unix socket tests cover that path).
 *
 * ```ts
 * import { ExecutorClient, Harness } from "bma-executor-sdk/node";
 *
 * // `authenticate` decides on each connection and says who connects: one token, one machine.
 * const harness = new Harness({
 *   authenticate: ({ token }) => {
 *     if (token !== "mt_demo") throw new Error("unknown credential"); // HTTP 401
 *     return { scope: "machine", machineId: "m_1", credentialId: "cred_m_1" };
 *   },
 * });
 * const server = await harness.serve({ hostname: "127.0.0.1", port: 0 }); // or serveUnix(path)
 *
 * const client = new ExecutorClient({
 *   machineId: "m_1", // registers as exec_m_1, the one id this credential may take
 *   tokenSource: () =>
 *     Promise.resolve({ token: "mt_demo", expiresAt: Date.now() + 3_600_000, url: server.url }),
 *   executor: { name: "my-executor", os: "linux", arch: "x64", version: "0.1.0" },
 * });
 * client.tools.bash.handle(async (input) => ({ stdout: "", stderr: "", exit_code: 0 }));
 * await client.start();
 * // Or the brain dials the executor: await client.listen(url), then await harness.dial(url).
 * await client.stop();
 * await harness.close();
 * ```
 *
 * @module
 */
export * from "./mod.ts";
export {
  type ChildEnvironmentOptions,
  ExecutorClient,
  type MachineLimits,
  type McpServerConfig,
  nodePty,
  type Pty,
  type PtyEvents,
  type PtyExit,
  type PtyHost,
  PtySpawnError,
  type PtySpawnOptions,
  serveMachine,
  type ServeMachineOptions,
} from "./executor/node.ts";
export { Harness } from "./harness/node.ts";
export {
  type InspectorServer,
  serveInspector,
  type ServeInspectorOptions,
} from "./harness/inspector/serve.node.ts";
export { dialWebSocket, serveWebSocket } from "./transport/node.ts";
export type { NodeSqliteDriver, NodeSqliteStoreOptions } from "./harness/store/sqlite.node.ts";
import type { SqlHarnessStore } from "./harness/store/sql.ts";
import { openSqliteStore as openOnBun } from "./harness/store/sqlite.bun.ts";
import { openSqliteStore as openOnDeno } from "./harness/store/sqlite.deno.ts";
import {
  type NodeSqliteStoreOptions,
  openSqliteStore as openOnNode,
} from "./harness/store/sqlite.node.ts";

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
