/**
 * This process as the holder of a harness store (Node, Deno and Bun, through `node:os` and
 * `process`): its machine's name, its pid, when it started, and a signal-0 probe for whether
 * another process of this machine still runs.
 *
 * @module
 */
import { hostname } from "node:os";
import process from "node:process";
import type { HolderIdentity } from "./claim.ts";

/** Whether process `pid` of this machine runs (EPERM: it does, as another user's). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/** This process's {@linkcode HolderIdentity}. */
export function processHolderIdentity(): HolderIdentity {
  return {
    host: hostname(),
    pid: process.pid,
    processStarted: Math.round(performance.timeOrigin),
    alive,
  };
}
