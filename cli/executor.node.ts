#!/usr/bin/env node
/**
 * `bma-executor` on Node (the npm package's `bma-executor` bin): the command of
 * `executor-main.node.ts` with Node's runtime record. On Deno and Bun, run `executor.deno.ts` and
 * `executor.bun.ts`: each injects its own runtime's pieces (Bun's terminals are its own).
 *
 * @module
 */
import { stopOnEarlySignals } from "./early-signals.node.ts";

// Signals are handled before the SDK loads: docs/cli.md promises exit 0 at any point.
const handOver = stopOnEarlySignals();
const [{ nodeRuntime }, { runExecutorCli }] = await Promise.all([
  import("../runtime/node.ts"),
  import("./executor-main.node.ts"),
]);
handOver();
runExecutorCli(nodeRuntime);
