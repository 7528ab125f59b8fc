/**
 * When the executor's process ends without ending its processes itself (a signal it does not
 * handle, `kill -9`), none of them outlives it: a user's SDK program (`sdk-program.ts`: an
 * `ExecutorClient` and `serveMachine` through this runtime's entry point, no signal handler of
 * its own) with a bash call, a `process.start`, a terminal and an MCP server running, each a
 * `sleep`, is sent SIGINT or SIGKILL; then every process it had started (read from `/proc`, the
 * whole tree under it) must vanish, and the cgroups it made for them (where it could make any).
 * The test polls for that with a generous bound (a minute): no assertion of speed.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as Entry from "../../node.ts";
import { CgroupTree, ownCgroupDirectory } from "../../executor/machine/cgroup.node.ts";
import { RUNTIME, spawnTs } from "../helpers/runtime-command.ts";
import { pidFrom, until } from "./machine-fixture.ts";

const sdk: typeof Entry = await import(`../../${RUNTIME}.ts`);

/** A process as `/proc/<pid>/stat` shows it: its parent, and its start time (a pid is reused). */
interface ProcessStat {
  readonly state: string;
  readonly ppid: number;
  readonly start: string;
}

function statOf(pid: number): ProcessStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime priority nice threads itrealvalue starttime ..."
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0], ppid: Number(fields[1]), start: fields[19] };
}

/** A process that was seen once: alive while its pid runs the same process, not as a zombie. */
interface Seen {
  readonly pid: number;
  readonly start: string;
  readonly command: string;
}

function stillAlive(process: Seen): boolean {
  const stat = statOf(process.pid);
  return stat !== undefined && stat.start === process.start && stat.state !== "Z" &&
    stat.state !== "X";
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
  } catch {
    return "?";
  }
}

/** Every live descendant of `root`, as it is now. */
function descendants(root: number): Seen[] {
  const children = new Map<number, number[]>();
  const stats = new Map<number, ProcessStat>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = statOf(Number(entry));
    if (!stat || stat.state === "Z") continue;
    stats.set(Number(entry), stat);
    children.set(stat.ppid, [...children.get(stat.ppid) ?? [], Number(entry)]);
  }
  const found: Seen[] = [];
  const queue = [...children.get(root) ?? []];
  while (queue.length > 0) {
    const pid = queue.shift()!;
    found.push({ pid, start: stats.get(pid)!.start, command: commandOf(pid) });
    queue.push(...children.get(pid) ?? []);
  }
  return found;
}

/**
 * The executor's own cgroup directories (`bma-<pid>-…`) of process `pid`, under the cgroup this
 * process is in (which the program, its child, is in too).
 */
function cgroupsOf(pid: number): string[] {
  const dir = ownCgroupDirectory();
  if (!dir) return [];
  try {
    return readdirSync(dir).filter((name) => name.startsWith(`bma-${pid}-`));
  } catch {
    return [];
  }
}

/** Survivors of `started` once they are all gone, or once a generous bound has passed. */
async function survivors(started: readonly Seen[], program: number): Promise<string[]> {
  const left = () => [
    ...started.filter(stillAlive).map((p) => `${p.pid} ${p.command}`),
    ...cgroupsOf(program).map((name) => `cgroup ${name}`),
  ];
  for (const bound = Date.now() + 60_000; Date.now() < bound;) {
    if (left().length === 0) return [];
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return left();
}

const cgroupsHere = (await CgroupTree.open()) !== undefined;
const MODES = [
  { signal: "SIGINT", cgroups: true },
  { signal: "SIGKILL", cgroups: true },
  { signal: "SIGKILL", cgroups: false },
] as const;

describe(`an SDK program's processes end with its process (${RUNTIME})`, {
  timeout: 180_000,
  skip: process.platform !== "linux" && "reads /proc",
}, () => {
  const cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  for (const { signal, cgroups } of MODES) {
    const mode = cgroups && cgroupsHere ? "in cgroups" : "process groups only";
    it(`${signal} (${mode}): its bash call, process, terminal and MCP server are all gone`, async () => {
      const dir = realpathSync(mkdtempSync(join(tmpdir(), "bma-death-")));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const harness = new sdk.Harness({ insecureNoAuth: true });
      const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      cleanups.push(async () => {
        await harness.close();
        await server.close();
      });
      const program: ChildProcess = spawnTs(
        "tests/machine/sdk-program.ts",
        [server.url, dir, String(cgroups)],
        { stdio: ["ignore", "ignore", "inherit"] },
      );
      const exited = new Promise<void>((resolve) => program.once("exit", () => resolve()));
      let started: Seen[] = [];
      cleanups.push(async () => {
        // Whatever is left (the test failed) does not outlive it.
        for (const process of started) {
          if (stillAlive(process)) globalThis.process.kill(process.pid, "SIGKILL");
        }
        if (program.exitCode === null && program.signalCode === null) {
          program.kill("SIGKILL");
          await exited;
        }
      });

      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_death" });
      await session.ready();
      const bashPidFile = join(dir, "bash-sleep.pid");
      const call = session.tools.bash.call({
        command: `sleep 1000 & echo $! > ${bashPidFile}; wait`,
      }).catch((error) => error);
      const bashSleep = await pidFrom(bashPidFile);
      const process = await executor.request("process.start", {
        session_id: session.id,
        argv: ["sleep", "1000"],
      });
      const terminal = await executor.request("terminal.open", {
        session_id: session.id,
        argv: ["sleep", "1000"],
      });
      await executor.request("mcp.open", { session_id: session.id, server: "sleeper" });

      // Every process under the program once the four sleeps run (a program in a cgroup is
      // exec'd by a wrapper once it has entered it): their shells, whatever else it started.
      const sleeping = (seen: Seen[]) =>
        seen.filter((p) => /^(\S*\/)?sleep 1000$/.test(p.command)).map((p) => p.pid);
      await until(() => sleeping(started = descendants(program.pid!)).length === 4);
      for (const pid of [bashSleep, process.pid!, terminal.pid!]) {
        assert.ok(sleeping(started).includes(pid), `${pid}: ${JSON.stringify(started)}`);
      }
      assert.equal(cgroupsOf(program.pid!).length > 0, cgroups && cgroupsHere);

      program.kill(signal);
      await exited;
      assert.equal(program.signalCode, signal, "the program had no handler of its own");
      assert.deepEqual(await survivors(started, program.pid!), []);
      // The harness fails the call when the executor's lease runs out (or it is closed).
      void call;
    });
  }
});
