/**
 * What the executor started ends when the executor's process does, however that ends: a signal
 * it does not handle (an SDK program's Ctrl-C), `kill -9`, an out-of-memory kill. Its processes
 * lead sessions of their own (so that a Ctrl-C at the executor's terminal does not reach them,
 * and they can be ended as a unit), which also means nothing ends them with it: a process keeps
 * running under PID 1 unless someone outlives the executor to end it.
 *
 * That someone is the reaper: one small process per executor process, started on first use, a
 * POSIX shell (no runtime of ours: about a MiB, a millisecond to start) in a session of its own.
 * It reads registrations from a pipe whose other end only the executor holds: `+s <pid>` for a
 * session (and process group) that `pid` leads, `+c <dir>` for a cgroup, `-s`/`-c` to forget
 * one. When the executor's process ends, in whatever way, the kernel closes its end; the shell
 * reads end-of-file and sends SIGTERM to every process of each session still registered (its
 * process group and, on Linux, every process whose session it is, read from `/proc`), SIGKILL
 * {@linkcode REAP_GRACE_S} later, kills and removes each registered cgroup (`cgroup.kill`), and
 * exits. Nothing polls, and a tool call costs one short write to the pipe when it starts and one
 * when it is gone.
 *
 * A registration is withdrawn once none of its processes is left ({@linkcode ProcessWatch}): the
 * reaper must never signal a process group whose number the kernel has handed out again.
 *
 * Not on Windows (no process groups, no `/bin/sh`): there a child outlives a killed executor.
 */
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
// node:timers' timers can be unref'd on every runtime (Deno's global ones are numbers).
import { clearInterval, setInterval } from "node:timers";
import type { Logger } from "../../protocol/logger.ts";
import type { ReaperEvents, ReaperProcess } from "./reaper-process.ts";
import { startReaperOnBun } from "./reaper-process.bun.ts";

/** Seconds between the reaper's SIGTERM and its SIGKILL. */
export const REAP_GRACE_S = 1;

/**
 * The reaper's program (dash, bash, busybox sh). Registrations are kept as " 12 34 " (sessions)
 * and one cgroup directory a line; the loop ends at end-of-file, when the executor is gone.
 */
const SCRIPT = `trap '' INT HUP QUIT PIPE
nl='
'
s=' '
c=$nl
while IFS= read -r line; do
  id=\${line#?? }
  case $line in
    '+s '*) s="$s$id " ;;
    '-s '*) case $s in *" $id "*) s="\${s%% "$id" *} \${s#* "$id" }" ;; esac ;;
    '+c '*) c="$c$id$nl" ;;
    '-c '*) case $c in *"$nl$id$nl"*) c="\${c%%"$nl$id$nl"*}$nl\${c#*"$nl$id$nl"}" ;; esac ;;
  esac
done
[ "$s" = ' ' ] && [ "$c" = "$nl" ] && exit 0
sweep() {
  for id in $s; do kill -s "$1" -- "-$id" 2>/dev/null; done
  [ -r /proc/self/stat ] || return 0
  sig=$1
  for f in /proc/[0-9]*/stat; do
    { IFS= read -r line < "$f"; } 2>/dev/null || continue
    set -- \${line##*) }
    [ "$1" = Z ] && continue
    case $s in *" $4 "*) p=\${f#/proc/}; kill -s "$sig" "\${p%/stat}" 2>/dev/null ;; esac
  done
}
sweep TERM
sleep ${REAP_GRACE_S}
sweep KILL
printf '%s' "$c" | while IFS= read -r d; do
  [ -n "$d" ] || continue
  { echo 1 > "$d/cgroup.kill"; } 2>/dev/null
  n=0
  while [ -d "$d" ] && [ $n -lt 10 ]; do
    for p in $(cat "$d/cgroup.procs" "$d"/*/cgroup.procs 2>/dev/null); do
      kill -s KILL "$p" 2>/dev/null
    done
    rmdir "$d"/*/ "$d" 2>/dev/null
    [ -d "$d" ] && sleep 1
    n=$((n + 1))
  done
done
`;

const SUPPORTED = process.platform !== "win32";
/** A reaper that ends sooner than this after its start is not started again until needed. */
const RESTART_AFTER_MS = 1_000;

/** The reaper's environment: nothing of the executor's. */
const REAPER_ENV = { PATH: "/usr/bin:/bin" };

/** Starts the reaper with `node:child_process` (Node and Deno write a child's stdin at once). */
function startWithNode(events: ReaperEvents): ReaperProcess {
  const child = spawn("/bin/sh", ["-c", SCRIPT], {
    // Its own session: a Ctrl-C (or any signal to the executor's process group) passes it by.
    detached: true,
    // Its stdin is the pipe; nothing else of the executor's (the runtimes open every other
    // descriptor close-on-exec), so the pipe closes when the executor's process ends.
    stdio: ["pipe", "ignore", "ignore"],
    env: REAPER_ENV,
  });
  child.stdin?.on("error", () => {}); // the reaper ended: handled on "exit"
  child.once("error", (error) => events.error(error));
  child.once("exit", () => events.exit());
  // The executor's process may end whenever it likes: the reaper does not hold it.
  child.unref();
  (child.stdin as { unref?: () => void } | null)?.unref?.();
  return { write: (text) => void child.stdin?.write(text) };
}

/** The executor process's reaper (one per process, whatever number of clients it holds). */
class Reaper {
  #child: ReaperProcess | undefined;
  #startedAt = 0;
  #failed = false;
  #logger: Logger | undefined;
  /** Registration lines ("s 123", "c /sys/fs/cgroup/...") and how many hold each. */
  readonly #registered = new Map<string, number>();

  /** Registers `line`; the returned function withdraws it (once). */
  register(line: string, logger: Logger | undefined): () => void {
    this.#logger ??= logger;
    const holders = this.#registered.get(line) ?? 0;
    this.#registered.set(line, holders + 1);
    if (holders === 0) this.#send(`+${line}\n`);
    let withdrawn = false;
    return () => {
      if (withdrawn) return;
      withdrawn = true;
      const left = (this.#registered.get(line) ?? 1) - 1;
      if (left > 0) {
        this.#registered.set(line, left);
        return;
      }
      this.#registered.delete(line);
      this.#send(`-${line}\n`);
    };
  }

  #send(text: string): void {
    if (this.#child) {
      this.#child.write(text);
      return;
    }
    // A new reaper learns every registration at once (`text` is one of them, or withdrawn).
    if (this.#registered.size > 0) this.#start();
  }

  #start(): void {
    if (this.#failed) return;
    let child: ReaperProcess | undefined;
    const events: ReaperEvents = {
      error: (error) => {
        if (this.#child === child) this.#child = undefined;
        this.#fail(error);
      },
      exit: () => {
        if (this.#child !== child) return;
        this.#child = undefined;
        // Ended by someone else (it ends by itself only once the executor is gone): a new one
        // takes over what is still registered, now or (after one that ended at once) on the
        // next registration.
        this.#logger?.warn("the process reaper ended while the executor runs");
        if (Date.now() - this.#startedAt >= RESTART_AFTER_MS && this.#registered.size > 0) {
          this.#start();
        }
      },
    };
    try {
      child = "Bun" in globalThis
        ? startReaperOnBun(SCRIPT, REAPER_ENV, events)
        : startWithNode(events);
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#child = child;
    this.#startedAt = Date.now();
    const lines = [...this.#registered.keys()].map((line) => `+${line}\n`).join("");
    if (lines) child.write(lines);
  }

  #fail(error: unknown): void {
    this.#failed = true;
    this.#logger?.warn(
      "cannot start the process reaper: processes may outlive a killed executor",
      { error: String(error) },
    );
  }
}

const reaper = new Reaper();

/**
 * Registers the session (and process group) that `pid` leads: its processes are ended if the
 * executor's process ends first. Withdraw it (the returned function) once none is left.
 */
export function reapSessionOnExit(pid: number, logger?: Logger): () => void {
  if (!SUPPORTED || !Number.isSafeInteger(pid) || pid <= 1) return () => {};
  return reaper.register(`s ${pid}`, logger);
}

/**
 * Registers a cgroup directory: killed and removed, with what is below it, if the executor's
 * process ends first. Withdraw it (the returned function) once it is removed.
 */
export function reapCgroupOnExit(dir: string, logger?: Logger): () => void {
  if (!SUPPORTED || dir.includes("\n")) return () => {};
  return reaper.register(`c ${dir}`, logger);
}

/**
 * A registered session whose leader has exited while others of its processes live on (a job
 * left in the background): its registration is withdrawn once none of them is left, looked for
 * every {@linkcode LINGER_POLL_MS} in one pass over `/proc` for all such sessions.
 */
export interface ProcessWatch {
  /**
   * Whether any of its processes is alive, given the groups and sessions of every live process
   * (undefined where `/proc` cannot tell: ask another way).
   */
  alive(live: ReadonlySet<number> | undefined): boolean;
  /** Withdraws the registration. */
  withdraw(): void;
}

const LINGER_POLL_MS = 2_000;
const lingering = new Set<ProcessWatch>();
let lingerTimer: ReturnType<typeof setInterval> | undefined;

/** Keeps looking at `watch` until none of its processes is left, then withdraws it. */
export function withdrawWhenGone(watch: ProcessWatch): void {
  lingering.add(watch);
  if (lingerTimer) return;
  lingerTimer = setInterval(() => {
    const live = liveGroupsAndSessions();
    for (const entry of lingering) {
      if (entry.alive(live)) continue;
      lingering.delete(entry);
      entry.withdraw();
    }
    if (lingering.size === 0) {
      clearInterval(lingerTimer);
      lingerTimer = undefined;
    }
  }, LINGER_POLL_MS);
  lingerTimer.unref();
}

/** Stops looking at `watch` (it was withdrawn by other means). */
export function forgetWatch(watch: ProcessWatch): void {
  lingering.delete(watch);
}

/**
 * The process groups and sessions of every live (not zombie) process, from one pass over
 * `/proc`; undefined where there is none (then each is asked with `kill(-pgid, 0)`).
 */
function liveGroupsAndSessions(): Set<number> | undefined {
  if (process.platform !== "linux") return undefined;
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const live = new Set<number>();
  for (const entry of entries) {
    const first = entry.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    let text: string;
    try {
      text = readFileSync(`/proc/${entry}/stat`, "latin1");
    } catch {
      continue;
    }
    // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ", 4);
    if (fields[0] === "Z" || fields[0] === "X") continue;
    live.add(Number(fields[2]));
    live.add(Number(fields[3]));
  }
  return live;
}
