/**
 * Runs the conformance harness agent in this process with this runtime's entry point (`deno.ts`
 * or `bun.ts`: `Deno.serve` / `Bun.serve`), served on stdin/stdout (`rpc.ts`).
 */
import type * as Sdk from "../../node.ts";
import { HarnessAgent } from "./harness-agent.ts";
import { type Runtime, serveAgent } from "./rpc.ts";

const RUNTIME: Runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const sdk: typeof Sdk = await import(`../../${RUNTIME}.ts`);
const agent = new HarnessAgent(sdk, await import("../../agent/mod.ts"));
serveAgent(agent, () => agent.closeAll());
