/**
 * The {@linkcode Runtime} record of Cloudflare Workers, which `bma-executor-sdk/workers`
 * (`workers.ts`, `executor/workers.ts`) hands to the portable classes: a Worker dials with
 * `fetch` and `Upgrade: websocket` (`transport/workers.ts`) and has nothing else of a process:
 * it cannot listen on a socket (no `listen()`), runs no machine, and its harness is hosted by a
 * Durable Object over the object's storage (`harness/workers/`).
 *
 * @module
 */
import { dialWebSocket } from "../transport/workers.ts";
import type { Runtime } from "./runtime.ts";

/** The Workers' pieces: a dialer. */
export const workersRuntime: Runtime = { name: "workers", dial: dialWebSocket };
