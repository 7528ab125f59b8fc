#!/usr/bin/env bun
/**
 * `bma-executor` on Bun (and `npm run compile`'s single file, `bun build --compile`): the command
 * of `executor-main.node.ts` with Bun's runtime record, whose terminals are `Bun.spawn`'s own.
 *
 * @module
 */
import { stopOnEarlySignals } from "./early-signals.node.ts";

// Signals are handled before the SDK loads: docs/cli.md promises exit 0 at any point.
const handOver = stopOnEarlySignals();
const [{ bunRuntime }, { runExecutorCli }] = await Promise.all([
  import("../runtime/bun.ts"),
  import("./executor-main.node.ts"),
]);
handOver();
runExecutorCli(bunRuntime);
