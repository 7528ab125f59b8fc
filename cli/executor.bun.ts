#!/usr/bin/env bun
/**
 * `bma-executor` on Bun (and `npm run compile`'s single file, `bun build --compile`): the command
 * of `executor-main.node.ts` with Bun's runtime record, whose terminals are `Bun.spawn`'s own.
 *
 * @module
 */
import { bunRuntime } from "../runtime/bun.ts";
import { runExecutorCli } from "./executor-main.node.ts";

runExecutorCli(bunRuntime);
