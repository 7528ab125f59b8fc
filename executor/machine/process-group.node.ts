/**
 * Child processes in their own process group, so that ending one ends everything it started:
 * SIGTERM to the group, then SIGKILL after a grace period.
 */
import { type ChildProcess, spawn } from "node:child_process";

/** Options of {@linkcode spawnGroup}. */
export interface SpawnGroupOptions {
  cwd: string;
  env?: Record<string, string>;
  /** Keep stdin open for writing. Default: stdin is closed (/dev/null). */
  stdin?: boolean;
}

/** Starts `argv` as the leader of a new process group. */
export function spawnGroup(argv: string[], options: SpawnGroupOptions): ChildProcess {
  return spawn(argv[0], argv.slice(1), {
    cwd: options.cwd,
    env: { ...process.env, ...options.env },
    detached: process.platform !== "win32",
    stdio: [options.stdin ? "pipe" : "ignore", "pipe", "pipe"],
    windowsHide: true,
  });
}

/** Sends a signal to a child's whole process group (the child alone on Windows). */
export function signalGroup(child: ChildProcess, signal: NodeJS.Signals): boolean {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return false;
  try {
    if (process.platform === "win32") return child.kill(signal);
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * Ends a child's process group: SIGTERM, then SIGKILL if it is still there after `graceMs`.
 * Resolves once the child has exited.
 */
export function terminateGroup(child: ChildProcess, graceMs = 2_000): Promise<void> {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  signalGroup(child, "SIGTERM");
  const timer = setTimeout(() => {
    signalGroup(child, "SIGKILL");
    if (child.pid !== undefined && process.platform !== "win32") {
      try {
        process.kill(-child.pid, "SIGKILL"); // stragglers of a leader that already exited
      } catch { /* the group is gone */ }
    }
  }, graceMs);
  return exited.finally(() => clearTimeout(timer));
}

/** The exit code of a finished child, `128 + n` when killed by signal n (as a shell reports it). */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  const numbers: Record<string, number> = {
    SIGHUP: 1,
    SIGINT: 2,
    SIGQUIT: 3,
    SIGKILL: 9,
    SIGTERM: 15,
  };
  return 128 + (signal ? numbers[signal] ?? 0 : 0);
}
