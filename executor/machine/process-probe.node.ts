/**
 * Whether another process of this machine still runs, by its pid: one probe for everything that
 * asks (the executor sweeping the cgroups an executor that is gone left behind, a harness judging
 * its store's holder), so all of them count the same processes as alive. Node, Deno and Bun
 * (`node:fs`, `process.kill`).
 *
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";

/**
 * The fields of Linux's `/proc/<pid>/stat` after the command name: `[0]` the state, `[19]` the
 * start time in clock ticks after boot. Undefined: no such process, or no `/proc` (not Linux).
 */
export function procStat(pid: number): string[] | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid …": the command name may hold spaces and parentheses.
  return text.slice(text.lastIndexOf(")") + 2).split(" ");
}

/**
 * Whether process `pid` of this machine runs. `kill(pid, 0)` answers for a zombie too (a process
 * that ended and that its parent has not reaped yet, as after a `kill -9` until its parent
 * waits), so on Linux its state in `/proc` decides; elsewhere the signal alone does (EPERM: it
 * runs, as another user's). A pid that is not positive names no one process.
 */
export function processAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as { code?: string }).code !== "EPERM") return false;
  }
  // Z: a zombie; X: dead, being reaped. No /proc entry (not Linux, or gone meanwhile): the
  // signal's answer stands.
  const state = procStat(pid)?.[0];
  return state !== "Z" && state !== "X";
}
