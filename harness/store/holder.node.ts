/**
 * This process as the holder of a harness store (Node, Deno and Bun, through `node:os` and
 * `process`): its machine's name, its pid, when it started, and whether another process of this
 * machine still runs (a zombie does not: {@linkcode processAlive}); and the means to end a stale
 * holder of this machine that still holds the database's lock (frozen inside a transaction).
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import process from "node:process";
import { processAlive, procStat } from "../../executor/machine/process-probe.node.ts";
import type { HolderIdentity } from "./claim.ts";

/**
 * How far a process's start time as the system tells it may lie from the `processStarted` its
 * harness recorded (the runtime's time origin, a little after `exec`; the system's clock ticks
 * and boot time in whole seconds), ms.
 */
const START_TOLERANCE_MS = 3_000;

/** When process `pid` of this machine started, ms since the epoch (undefined: not known). */
function startedAt(pid: number): number | undefined {
  try {
    // Linux: field 22 of /proc/PID/stat, in clock ticks (100 a second) after boot.
    const fields = procStat(pid);
    const ticks = Number(fields?.[19]);
    const boot = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"));
    if (fields && boot && Number.isFinite(ticks)) return Number(boot[1]) * 1000 + ticks * 10;
  } catch {
    // Not Linux, or no such process: ask ps.
  }
  try {
    const started = execFileSync("ps", ["-o", "lstart=", "-p", String(pid)], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      env: { LC_ALL: "C" },
    }).trim();
    const time = Date.parse(started);
    return Number.isFinite(time) ? time : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Ends process `pid` of this machine with SIGKILL (the only end a frozen process cannot put
 * off), if it started at `processStarted`: a later process that got its pid is left alone.
 */
function stop(pid: number, processStarted: number): boolean {
  const started = startedAt(pid);
  if (started === undefined || Math.abs(started - processStarted) > START_TOLERANCE_MS) {
    return false;
  }
  try {
    process.kill(pid, "SIGKILL");
    return true;
  } catch {
    return false;
  }
}

/** This process's {@linkcode HolderIdentity}. */
export function processHolderIdentity(): HolderIdentity {
  return {
    host: hostname(),
    pid: process.pid,
    processStarted: Math.round(performance.timeOrigin),
    alive: processAlive,
    stop,
  };
}
