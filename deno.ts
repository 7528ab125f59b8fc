/**
 * bma-executor-sdk for Deno: the whole public API of `mod.ts`, with Deno's transports injected.
 * `ExecutorClient` dials `ws://` and Unix sockets with the byte-stream client over Deno's
 * `node:net` (`wss://` with the `ws` package) and `listen`s with `Deno.serve`; `Harness` serves
 * TCP with the `ws` server on Deno's `node:http` (it writes a turn's frames at once, which
 * `Deno.upgradeWebSocket` cannot) and Unix sockets (`unix:///path.sock`) with `Deno.serve`, and
 * dials like the executor. `serveWebSocket` below is `Deno.serve` for both.
 * Windows named pipes (`\\.\pipe\name`) are dialed through `node:net`, the Unix
 * socket code path; to serve one, use `bma-executor-sdk/node` (untested here: nothing runs Windows).
 *
 * ```ts
 * import { ExecutorClient, Harness } from "bma-executor-sdk/deno";
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
} from "./executor/deno.ts";
export { Harness } from "./harness/deno.ts";
export {
  type InspectorServer,
  serveInspector,
  type ServeInspectorOptions,
} from "./harness/inspector/serve.node.ts";
export { dialWebSocket, serveWebSocket } from "./transport/deno.ts";
export {
  type DenoSqliteDriver,
  type DenoSqliteStoreOptions,
  openSqliteStore,
} from "./harness/store/sqlite.deno.ts";
