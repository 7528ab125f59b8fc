#!/usr/bin/env -S deno run -A
/**
 * `bma-executor` on Deno (and `deno task compile`'s single file): the command of
 * `executor-main.node.ts` with Deno's runtime record.
 *
 * @module
 */
import { stopOnEarlySignals } from "./early-signals.node.ts";

// Signals are handled before the SDK loads: docs/cli.md promises exit 0 at any point.
const handOver = stopOnEarlySignals();
const [{ denoRuntime }, { runExecutorCli }] = await Promise.all([
  import("../runtime/deno.ts"),
  import("./executor-main.node.ts"),
]);
handOver();
runExecutorCli(denoRuntime);
