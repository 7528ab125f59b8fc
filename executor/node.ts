/**
 * The executor end preconfigured for Node (and Deno and Bun through their Node compatibility):
 * `ExecutorClient` dials `ws://` and `unix:///path.sock` with the byte-stream client over
 * `node:net` (`transport/websocket-stream.node.ts`), `wss://` with the `ws` package, and
 * `listen`s with Node's `http` server and `ws`. Everything else is re-exported from the portable
 * `executor/mod.ts`.
 * Artifacts of an executor that dialed `unix:///path.sock` are uploaded to that harness through
 * the same socket (`transport/http-socket.node.ts`).
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/node.ts";
import { fetchOverSocket } from "../transport/http-socket.node.ts";
import { ExecutorClient as PortableExecutorClient, type ExecutorClientOptions } from "./mod.ts";
import type { Disposable } from "../protocol/peer.ts";
import { nodePty } from "./machine/pty.node.ts";
import {
  serveMachine as serveMachineWith,
  type ServeMachineOptions,
} from "./machine/serve.node.ts";

export * from "./mod.ts";
export type { ServeMachineOptions } from "./machine/serve.node.ts";
export type { ChildEnvironmentOptions } from "./machine/child-env.node.ts";
export type { McpServerConfig } from "./machine/mcp-config.ts";
export type { MachineLimits } from "./machine/limits.ts";
export type { Pty, PtyEvents, PtyExit, PtyHost, PtySpawnOptions } from "./machine/pty.ts";
export { PtySpawnError } from "./machine/pty.ts";

/** {@linkcode PortableExecutorClient} with the Node WebSocket dialer and server as its defaults. */
export class ExecutorClient extends PortableExecutorClient {
  /** A client with Node's transports unless `dial` / `server` are given. */
  constructor(options: ExecutorClientOptions) {
    super({
      dial: dialWebSocket,
      server: serveWebSocket,
      socketFetch: fetchOverSocket,
      ...options,
    });
  }
}

/**
 * Serves this machine on `client`: the `bash` and file tools confined to `options.workdir`,
 * `process.*`, `terminal.*` (PTYs through `@lydell/node-pty`; pass `pty: false` to leave
 * terminals out), file transfer, `skill.install`, `git.credentials`, `workspace.backup` and,
 * with `mcpServers`, the MCP relay. Each advertises its capability. Dispose to withdraw them.
 *
 * ```ts
 * import { ExecutorClient, serveMachine } from "bma-executor-sdk/node";
 *
 * const client = new ExecutorClient({
 *   harnessUrl: "ws://127.0.0.1:7700",
 *   executor: { name: "my-app", os: "linux", arch: "x64", version: "1.0.0" },
 * });
 * const machine = serveMachine(client, { workdir: "./work" });
 * await client.start();
 * // machine.dispose() withdraws it all and ends the terminals.
 * ```
 */
export function serveMachine(
  client: PortableExecutorClient,
  options: ServeMachineOptions,
): Disposable {
  return serveMachineWith(client, { pty: nodePty, ...options });
}

/** The PTYs Node (and Deno) terminals run on (what `serveMachine` uses by default). */
export { nodePty };
