#!/usr/bin/env node
/**
 * `bma-executor` on Node (the npm package's `bma-executor` bin): the command of
 * `executor-main.node.ts` with Node's runtime record. On Deno and Bun, run `executor.deno.ts` and
 * `executor.bun.ts`: each injects its own runtime's pieces (Bun's terminals are its own).
 *
 * @module
 */
import { nodeRuntime } from "../runtime/node.ts";
import { runExecutorCli } from "./executor-main.node.ts";

runExecutorCli(nodeRuntime);
