/**
 * bma-executor-sdk for Bun: the whole public API of `mod.ts`, with Bun's transports injected.
 * `ExecutorClient` and `Harness` dial `ws://` and Unix sockets (`unix:///path.sock`) with the
 * byte-stream client over `Bun.connect` and `wss://` with Bun's `WebSocket`, and serve (`listen`)
 * with `Bun.serve`. Windows named pipes (`\\.\pipe\name`): use `bma-executor-sdk/node`, whose
 * `node:net` code path Bun runs and the Unix socket tests cover (untested here: nothing runs
 * Windows).
 *
 * ```ts
 * import { ExecutorClient, Harness } from "bma-executor-sdk/bun";
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
  bunPty,
  ExecutorClient,
  type MachineLimits,
  type McpServerConfig,
  type Pty,
  type PtyEvents,
  type PtyExit,
  type PtyHost,
  PtySpawnError,
  type PtySpawnOptions,
  serveMachine,
  type ServeMachineOptions,
} from "./executor/bun.ts";
export { Harness } from "./harness/bun.ts";
export {
  type InspectorServer,
  serveInspector,
  type ServeInspectorOptions,
} from "./harness/inspector/serve.node.ts";
export { dialWebSocket, serveWebSocket } from "./transport/bun.ts";
export {
  type BunSqliteDriver,
  type BunSqliteStoreOptions,
  openSqliteStore,
} from "./harness/store/sqlite.bun.ts";
