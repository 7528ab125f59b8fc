/**
 * Fixtures of the machine tests: an `ExecutorClient` with the machine served on it
 * (`serveMachine`), connected over a real WebSocket on 127.0.0.1 to the project's `Harness`,
 * and one session assigned. Everything is closed by `fx.cleanup()`.
 */
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecutorClientOptions } from "../../executor/node.ts";
import { serveMachine, type ServeMachineOptions } from "../../executor/machine/serve.node.ts";
import type { ExecutorHandle, Session } from "../../harness/node.ts";
import { type Fixtures, SECRETS } from "../helpers/executor-fixture.ts";

export { SECRETS };

/** Options of {@linkcode startMachine}. */
export interface StartMachineOptions {
  machine?: Partial<ServeMachineOptions>;
  client?: Partial<ExecutorClientOptions>;
  /** Assign a long-lived harness session (default) or a one-shot one. */
  oneShot?: boolean;
  sessionId?: string;
}

/** A machine served on a client, registered with a harness, one session assigned and ready. */
export async function startMachine(fx: Fixtures, options: StartMachineOptions = {}) {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-machine-")));
  fx.defer(() => rmSync(dir, { recursive: true, force: true }));
  const { harness, server } = await fx.harness();
  const { client, logger } = fx.client(server, options.client);
  const served = serveMachine(client, { workdir: dir, graceMs: 300, ...options.machine });
  fx.defer(() => served.dispose());
  await client.start();
  const executor: ExecutorHandle = await harness.waitExecutor();
  const session: Session = await executor.assignSession({
    session_id: options.sessionId ?? "ses_machine",
    metadata: { source: options.oneShot ? "api" : "harness" },
  });
  await session.ready();
  return { dir, harness, server, client, logger, executor, session };
}

/**
 * Whether a process is alive: `kill(pid, 0)` succeeds and, on Linux, it is not a zombie (a
 * process that has exited and only waits for its parent to collect its status; here init
 * collects orphans lazily).
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  if (process.platform !== "linux") return true;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch {
    return false;
  }
}

/** Resolves once `check` holds, looking every 10 ms (the test's timeout bounds it). */
export async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** The pid a command wrote to `file`, once it has. */
export async function pidFrom(file: string): Promise<number> {
  await until(() => existsSync(file) && /^\d+\n/.test(readFileSync(file, "utf8")));
  return Number(readFileSync(file, "utf8"));
}

/**
 * `/proc/<pid>/environ` of a process once it runs `argv` (a spawned process may still be
 * between fork and exec, or in the executor's cgroup wrapper, when its pid is known).
 */
export async function environOf(pid: number, argv: string[]): Promise<string> {
  const cmdline = `${argv.join("\0")}\0`;
  await until(() => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "latin1") === cmdline;
    } catch {
      return false;
    }
  });
  return readFileSync(`/proc/${pid}/environ`, "latin1");
}

/** Parses `env -0` or `/proc/<pid>/environ` output (NUL-separated `NAME=value`). */
export function parseEnviron(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const entry of text.split("\0")) {
    const eq = entry.indexOf("=");
    if (eq > 0) out.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return out;
}
