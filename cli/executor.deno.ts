#!/usr/bin/env -S deno run -A
/**
 * `bma-executor` on Deno (and `deno task compile`'s single file): the command of
 * `executor-main.node.ts` with Deno's runtime record.
 *
 * @module
 */
import { denoRuntime } from "../runtime/deno.ts";
import { runExecutorCli } from "./executor-main.node.ts";

runExecutorCli(denoRuntime);
