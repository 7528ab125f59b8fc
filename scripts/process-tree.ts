/**
 * Every process a test stage started, found and ended, so that nothing outlives `npm test`.
 *
 * A stage's process group is not enough: the executor starts each program in a session of its
 * own (`setsid`), with an environment of its own, and a test killed at its limit leaves those
 * programs to init. So a {@linkcode ProcessTree} looks at `/proc` while the stage runs and keeps
 * every process that is, or was when it was seen, one of the stage's:
 * - a descendant of a process it keeps (by parent pid, seen while the parent lived);
 * - in a session or process group one of them leads (a grandchild outlives its parent there);
 * - carrying the stage's mark in its environment (whatever inherits the stage's environment);
 * - carrying the stage's mark in its resource limits (set with `prlimit` where it exists): the
 *   one attribute that survives `setsid`, a new environment and the loss of every ancestor,
 *   since hardly any program changes its message-queue limit.
 *
 * Linux only (`/proc`); elsewhere it keeps the stage's process group alone.
 */
import { readdirSync, readFileSync } from "node:fs";
import { spawnSync } from "node:child_process";

/** One process as `/proc/<pid>/stat` shows it. */
export interface ProcessInfo {
  pid: number;
  ppid: number;
  pgid: number;
  sid: number;
  /** Clock ticks since boot at its start: with the pid, names one process (pids are reused). */
  start: number;
  /** `Z` (zombie) and `X` (dead) have ended. */
  state: string;
  /** Clock ticks of CPU (user and system) it has used itself, children not counted. */
  cpuTicks: number;
  /** Clock ticks of CPU its children used, those it has waited for. */
  reapedCpuTicks: number;
}

const LINUX = process.platform === "linux";

/** The stat line of one process, or undefined once it is gone. */
export function readProcess(pid: number): ProcessInfo | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "latin1");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
  const close = stat.lastIndexOf(")");
  const fields = stat.slice(close + 2).split(" ");
  return {
    pid,
    state: fields[0],
    ppid: Number(fields[1]),
    pgid: Number(fields[2]),
    sid: Number(fields[3]),
    start: Number(fields[19]),
    cpuTicks: Number(fields[11]) + Number(fields[12]),
    reapedCpuTicks: Number(fields[13]) + Number(fields[14]),
  };
}

/** Every process of the machine, as `/proc` shows it now (none off Linux). */
export function allProcesses(): ProcessInfo[] {
  if (!LINUX) return [];
  const out: ProcessInfo[] = [];
  for (const entry of readdirSync("/proc")) {
    const first = entry.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    const info = readProcess(Number(entry));
    if (info) out.push(info);
  }
  return out;
}

/** A process's command line, for a report. */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0+$/, "").replaceAll("\0", " ");
  } catch {
    return "?";
  }
}

const ended = (info: ProcessInfo) => info.state === "Z" || info.state === "X";

/** Clock ticks a second in `/proc`'s CPU times (`USER_HZ`, 100 on every Linux architecture). */
const USER_HZ = 100;

/**
 * The CPU seconds (user and system) `pid` has used with the children it has waited for, now;
 * undefined off Linux or once it has ended.
 */
export function cpuSeconds(pid: number): number | undefined {
  const info = LINUX ? readProcess(pid) : undefined;
  // A zombie has ended, though its times stay readable until its parent reaps it.
  if (!info || ended(info)) return undefined;
  const ticks = info.cpuTicks + info.reapedCpuTicks;
  return Number.isFinite(ticks) ? ticks / USER_HZ : undefined;
}

/** The message-queue limit a stage is marked with, when `prlimit` can set it. */
export interface LimitMark {
  /** The command prefix that starts a program with the mark. */
  prefix: string[];
  /** The `Max msgqueue size` line's value that identifies the stage's processes. */
  value: number;
}

let prlimitPath: string | null | undefined;
/**
 * The limit mark `value`: the message-queue limit, lowered below the usual 819200 bytes (lowering
 * needs no privilege). Undefined where `prlimit` is missing. Values must differ between the
 * stages that run at once.
 */
export function limitMark(value: number): LimitMark | undefined {
  if (!LINUX) return undefined;
  if (prlimitPath === undefined) {
    const found = spawnSync("sh", ["-c", "command -v prlimit"], { encoding: "utf8" });
    prlimitPath = found.status === 0 ? found.stdout.trim() || null : null;
  }
  if (!prlimitPath) return undefined;
  return { prefix: [prlimitPath, `--msgqueue=${value}:${value}`, "--"], value };
}

/** The processes of one stage: see the module comment. */
export class ProcessTree {
  readonly #kept = new Map<number, ProcessInfo>();
  /** Processes looked at and found not to be the stage's (pid → start), not read again. */
  readonly #foreign = new Map<number, number>();
  readonly #envMark: string;
  readonly #limitLine: RegExp | undefined;
  readonly #since: number;
  /** The CPU ticks each kept process had used itself at the last look (by pid and start). */
  readonly #cpuTicks = new Map<string, number>();

  /**
   * @param root the stage's first process (started as a process group leader)
   * @param envMark a `NAME=value` string in the environment of every process of the stage
   * @param limit the stage's limit mark, if it has one
   */
  constructor(root: number, envMark: string, limit?: LimitMark) {
    this.#envMark = envMark;
    this.#limitLine = limit && new RegExp(`^Max msgqueue size\\s+${limit.value}\\s`, "m");
    const info = LINUX ? readProcess(root) : undefined;
    this.#since = info?.start ?? 0;
    this.#keep(
      info ??
        {
          pid: root,
          ppid: 0,
          pgid: root,
          sid: root,
          start: 0,
          state: "R",
          cpuTicks: 0,
          reapedCpuTicks: 0,
        },
    );
  }

  #keep(info: ProcessInfo): void {
    this.#kept.set(info.pid, info);
    this.#foreign.delete(info.pid);
  }

  #marked(pid: number): boolean {
    try {
      if (readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").includes(this.#envMark)) {
        return true;
      }
    } catch { /* gone, or not ours to read */ }
    if (!this.#limitLine) return false;
    try {
      return this.#limitLine.test(readFileSync(`/proc/${pid}/limits`, "latin1"));
    } catch {
      return false;
    }
  }

  /** Keeps the stage's new processes among `all` (one look at `/proc`, shared by every tree). */
  scan(all: readonly ProcessInfo[] = allProcesses()): void {
    /** Start of each process now there: a kept pid counts only if it is still the same one. */
    const now = new Map<number, number>();
    for (const info of all) now.set(info.pid, info.start);
    // The sessions and groups a kept process is in now. A pid cannot be reused while a
    // session or group of that id has a member, so a process in one of these is the stage's;
    // once every member has gone, the same id may name someone else's new session.
    const groups = new Set<number>();
    const join = (info: ProcessInfo) => {
      groups.add(info.sid);
      groups.add(info.pgid);
    };
    for (const kept of this.#kept.values()) if (now.get(kept.pid) === kept.start) join(kept);
    const related = (info: ProcessInfo) => {
      const parent = this.#kept.get(info.ppid);
      return (parent !== undefined && now.get(parent.pid) === parent.start) ||
        groups.has(info.sid) || groups.has(info.pgid);
    };
    // Parents first is not guaranteed by pid order (pids wrap): repeat until nothing is added.
    for (let added = true; added;) {
      added = false;
      for (const info of all) {
        const known = this.#kept.get(info.pid);
        if (known && known.start === info.start) {
          this.#cpuTicks.set(`${info.pid}:${info.start}`, info.cpuTicks);
          continue;
        }
        if (info.start < this.#since) continue; // older than the stage
        if (this.#foreign.get(info.pid) === info.start && !related(info)) continue;
        if (related(info) || this.#marked(info.pid)) {
          this.#keep(info);
          this.#cpuTicks.set(`${info.pid}:${info.start}`, info.cpuTicks);
          join(info);
          added = true;
        } else {
          this.#foreign.set(info.pid, info.start);
        }
      }
    }
  }

  /**
   * The CPU seconds the stage's processes had used themselves when last seen: a process that
   * started and ended between two looks is not counted (its parent's `cpuSeconds` counts it).
   */
  cpuSeconds(): number {
    let ticks = 0;
    for (const used of this.#cpuTicks.values()) ticks += used;
    return ticks / USER_HZ;
  }

  /** The kept processes that are still running (not zombies), pid reuse excluded. */
  alive(): ProcessInfo[] {
    if (!LINUX) return [...this.#kept.values()].filter((p) => groupExists(p.pid));
    const out: ProcessInfo[] = [];
    for (const kept of this.#kept.values()) {
      const now = readProcess(kept.pid);
      if (now && now.start === kept.start && !ended(now)) out.push(now);
    }
    return out;
  }

  /**
   * SIGKILL to every kept process still running (off Linux: to the stage's process group). A
   * group is signalled only while one of its kept members lives, so a reused pid is spared.
   */
  killAll(): void {
    const alive = this.alive();
    for (const info of alive) {
      try {
        process.kill(LINUX ? info.pid : -info.pid, "SIGKILL");
      } catch { /* gone meanwhile */ }
    }
  }
}

function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
