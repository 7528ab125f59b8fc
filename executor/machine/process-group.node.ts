/**
 * A process the executor starts and everything it starts in turn, as one unit: the program is
 * the leader of a new process group (and session), inside a cgroup of its own where the
 * executor has one ({@linkcode Cgroup}). Ending the unit ends all of it: SIGTERM to every
 * process, then SIGKILL to every survivor once the grace period is over, whether or not the
 * leader is still there, and it is over only when none is left.
 *
 * Without a cgroup the unit is its process group: a descendant that leaves the group
 * (`setsid`, `setpgid`) is out of reach. On Windows it is the leader alone.
 *
 * Should the executor's process end first (killed, or a signal it does not handle), the unit is
 * ended all the same by the executor's reaper (`reaper.node.ts`), with which it is registered
 * from its start until none of its processes is left.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import type { Logger } from "../../protocol/logger.ts";
import { type Cgroup, inCgroup } from "./cgroup.node.ts";
import { findExecutable } from "./executable.node.ts";
import {
  forgetWatch,
  type ProcessWatch,
  reapSessionOnExit,
  withdrawWhenGone,
} from "./reaper.node.ts";

/** Options of {@linkcode ProcessUnit.spawn}. */
export interface SpawnUnitOptions {
  cwd: string;
  /** The child's whole environment (see `child-env.node.ts`): nothing else is inherited. */
  env: Record<string, string>;
  /** Keep stdin open for writing. Default: stdin is closed (/dev/null). */
  stdin?: boolean;
  /** Let stderr through as a pipe (default) or discard it. */
  stderr?: "pipe" | "ignore";
  /** The (empty, fresh) cgroup the unit lives in. */
  cgroup?: Cgroup;
  /** Where a failure of the executor's reaper is told. */
  logger?: Logger;
}

/** The program of a spawn could not be started (`ENOENT`, not executable, bad cwd). */
export class SpawnError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SpawnError";
  }
}

const POSIX = process.platform !== "win32";

/** What of a program's start holds a NUL byte (no C string can), or undefined. */
function withNulByte(argv: readonly string[], options: SpawnUnitOptions): string | undefined {
  const index = argv.findIndex((arg) => arg.includes("\0"));
  if (index >= 0) return index === 0 ? "the program's name" : `argument ${index}`;
  for (const [name, value] of Object.entries(options.env)) {
    if (name.includes("\0") || value?.includes("\0")) return "an environment variable";
  }
  if (options.cwd?.includes("\0")) return "the working directory";
  return undefined;
}
/** First pause between checks for survivors; doubles up to {@linkcode MAX_POLL_MS}. */
const FIRST_POLL_MS = 5;
const MAX_POLL_MS = 50;

/** A started program and its descendants. */
export class ProcessUnit {
  /** The leader (the program started). */
  readonly child: ChildProcess;
  /** The leader's pid, which is also the process group id. */
  readonly pid: number | undefined;
  /** The unit's cgroup, when it has one. */
  readonly cgroup: Cgroup | undefined;
  /** Resolves once the leader has exited (its descendants may live on). */
  readonly leaderExited: Promise<void>;
  #ending: Promise<void> | undefined;
  #killAt = Infinity;
  #killTimer: ReturnType<typeof setTimeout> | undefined;
  #killing = false;
  /** Withdraws the unit from the executor's reaper; undefined once withdrawn. */
  #unreap: (() => void) | undefined;
  /** Set while the unit outlives its leader and is looked at until none of it is left. */
  #lingering: ProcessWatch | undefined;

  private constructor(child: ChildProcess, cgroup: Cgroup | undefined, unreap: () => void) {
    this.child = child;
    this.pid = child.pid;
    this.cgroup = cgroup;
    this.#unreap = unreap;
    this.leaderExited = new Promise((resolve) => {
      if (!this.leaderRunning) resolve();
      else child.once("exit", () => resolve());
      child.once("error", () => resolve());
    });
    void this.leaderExited.then(() => this.#unreapWhenGone());
  }

  /**
   * Starts `argv` as a new unit. Resolves once the program runs; rejects with
   * {@linkcode SpawnError} when it cannot start.
   */
  static async spawn(argv: readonly string[], options: SpawnUnitOptions): Promise<ProcessUnit> {
    const nul = withNulByte(argv, options);
    // Node refuses such a string with its own TypeError, thrown: a spawn failure like any other.
    if (nul) throw new SpawnError(`cannot start the program: ${nul} contains a NUL byte`);
    const cgroup = options.cgroup;
    // Through the cgroup wrapper the shell starts whatever it is given: check first that the
    // program exists, so that a typo is a spawn failure as it is without the wrapper.
    if (cgroup) findProgram(argv[0], options.cwd, options.env.PATH);
    const command = cgroup ? inCgroup(cgroup, argv) : argv;
    const child = spawn(command[0], command.slice(1), {
      cwd: options.cwd,
      env: options.env,
      detached: POSIX,
      stdio: [options.stdin ? "pipe" : "ignore", "pipe", options.stderr ?? "pipe"],
      windowsHide: true,
    });
    // At once, before anything else can happen: the executor may be killed at any moment.
    const unreap = POSIX && child.pid !== undefined
      ? reapSessionOnExit(child.pid, options.logger)
      : () => {};
    const failure = await new Promise<Error | undefined>((resolve) => {
      child.once("spawn", () => resolve(undefined));
      child.once("error", (error) => resolve(error));
    });
    if (failure) {
      unreap();
      cgroup?.remove();
      throw new SpawnError(`cannot start ${argv[0]}: ${failure.message}`, { cause: failure });
    }
    return new ProcessUnit(child, cgroup, unreap);
  }

  /** Whether the leader is still running. */
  get leaderRunning(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null &&
      this.child.pid !== undefined;
  }

  /** Whether any process of the unit is still there (zombies do not count). */
  alive(): boolean {
    return this.#aliveGiven(undefined);
  }

  /**
   * {@linkcode alive}, given the groups and sessions of every live process where known (one
   * look at `/proc` for many units).
   */
  #aliveGiven(live: ReadonlySet<number> | undefined): boolean {
    if (this.leaderRunning) return true;
    if (!POSIX || this.pid === undefined) return false;
    // A cgroup holds the whole group and whatever left it; it is gone only if removed.
    const populated = this.cgroup?.populated();
    if (populated !== undefined) return populated;
    return live ? live.has(this.pid) : groupAlive(this.pid);
  }

  /**
   * Withdraws the unit from the reaper once none of its processes is left: now, or (when some
   * outlive the leader) once a later look finds none. Its process group's number may then be
   * handed out again, to a process the reaper must never signal.
   */
  #unreapWhenGone(): void {
    if (!this.#unreap || this.#lingering) return;
    if (!this.alive()) {
      this.#unreap();
      this.#unreap = undefined;
      return;
    }
    const watch: ProcessWatch = {
      alive: (live) => this.#aliveGiven(live),
      withdraw: () => {
        this.#lingering = undefined;
        this.#unreapWhenGone();
      },
    };
    this.#lingering = watch;
    withdrawWhenGone(watch);
  }

  /** Withdraws the unit from the reaper: none of its processes is left. */
  #unreapNow(): void {
    if (this.#lingering) forgetWatch(this.#lingering);
    this.#lingering = undefined;
    this.#unreap?.();
    this.#unreap = undefined;
  }

  /** Sends `signal` to every process of the unit; true when any received it. */
  signal(signal: NodeJS.Signals): boolean {
    if (!POSIX || this.pid === undefined) return this.signalLeader(signal);
    let delivered = false;
    if (this.cgroup) {
      if (signal === "SIGKILL" && this.cgroup.populated() !== false) {
        this.cgroup.kill();
        delivered = true;
      } else if (this.cgroup.signal(signal)) {
        delivered = true;
      }
    }
    try {
      process.kill(-this.pid, signal);
      delivered = true;
    } catch { /* the group is empty */ }
    return delivered;
  }

  /** Sends `signal` to the leader alone. */
  signalLeader(signal: NodeJS.Signals): boolean {
    if (!this.leaderRunning) return false;
    try {
      return this.child.kill(signal);
    } catch {
      return false;
    }
  }

  /**
   * Ends the unit: SIGTERM to every process, SIGKILL to every survivor after `graceMs`.
   * Resolves once none is left. A second call joins the first (a shorter grace hastens it).
   */
  terminate(graceMs: number): Promise<void> {
    const killAt = Date.now() + Math.max(0, graceMs);
    if (killAt < this.#killAt) {
      this.#killAt = killAt;
      clearTimeout(this.#killTimer);
      this.#killTimer = setTimeout(() => this.#startKilling(), Math.max(0, graceMs));
    }
    if (this.#ending) return this.#ending;
    this.signal("SIGTERM");
    this.#ending = this.#untilGone().finally(() => clearTimeout(this.#killTimer));
    return this.#ending;
  }

  /** Resolves once no process of the unit is left. */
  async #untilGone(): Promise<void> {
    let pause = FIRST_POLL_MS;
    while (this.alive()) {
      // SIGKILL again on every round: a process forked while the first went out is caught too.
      if (this.#killing) this.signal("SIGKILL");
      await new Promise((resolve) => setTimeout(resolve, pause));
      pause = Math.min(pause * 2, MAX_POLL_MS);
    }
    this.#unreapNow();
    this.cgroup?.remove();
  }

  #startKilling(): void {
    this.#killing = true;
    this.signal("SIGKILL");
  }

  /**
   * Lets go of the unit once none of its processes is left (true then): its cgroup removed, its
   * reaper registration withdrawn.
   */
  release(): boolean {
    if (this.alive()) return false;
    this.#unreapNow();
    return this.cgroup ? this.cgroup.remove() : true;
  }
}

/**
 * Whether any live (not zombie) process is in process group `pgid`. A group that holds only
 * zombies answers `kill(-pgid, 0)` too; on Linux `/proc` tells them apart.
 */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
  if (process.platform !== "linux") return true;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return true;
  }
  for (const entry of entries) {
    const first = entry.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    const stat = processStat(entry);
    if (stat && stat.pgrp === pgid && stat.state !== "Z" && stat.state !== "X") return true;
  }
  return false;
}

/** State and process group of a process from `/proc/<pid>/stat`. */
function processStat(pid: string): { state: string; pgrp: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0], pgrp: Number(fields[2]) };
}

/** Finds `program` as `execvp` would (in `PATH` unless it holds a slash); throws SpawnError. */
function findProgram(program: string, cwd: string, path: string | undefined): void {
  if (findExecutable(program, path, cwd) === undefined) {
    throw new SpawnError(`cannot start ${program}: not found or not executable`);
  }
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
