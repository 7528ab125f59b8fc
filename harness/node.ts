/**
 * The harness with the `ws`-based server of `transport/node.ts` as its default server factory:
 * one import for Node, Deno and Bun (all three run `ws`).
 *
 * ```ts
 * import { Harness } from "bma-executor-sdk/harness/node";
 * const harness = new Harness({
 *   authenticate: ({ token }) => {
 *     if (token !== "mt_demo") throw new Error("unknown credential"); // HTTP 401
 *     return { scope: "machine", machineId: "m_1", credentialId: "cred_m_1" }; // its identity
 *   },
 * });
 * const server = await harness.serve({ hostname: "127.0.0.1", port: 0 }); // or serveUnix(path)
 * ```
 *
 * @module
 */
import { dialWebSocket, serveWebSocket } from "../transport/node.ts";
import { Harness as CoreHarness, type HarnessOptions } from "./harness.ts";
import { processHolderIdentity } from "./store/holder.node.ts";

export * from "./mod.ts";
export {
  type InspectorServer,
  serveInspector,
  type ServeInspectorOptions,
} from "./inspector/serve.node.ts";

/**
 * A {@linkcode CoreHarness} whose `serve` / `serveUnix` / `dial` use `ws`
 * unless `server` / `dial` are given.
 */
export class Harness extends CoreHarness {
  /** A harness with Node's server and dialer unless `server` / `dial` are given. */
  constructor(options: HarnessOptions = {}) {
    super({
      server: serveWebSocket,
      dial: dialWebSocket,
      holderIdentity: processHolderIdentity(),
      ...options,
    });
  }
}
