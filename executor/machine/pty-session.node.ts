/**
 * The processes of a terminal: its program leads a session of its own (the PTY is that
 * session's controlling terminal), and a shell with job control puts each job into a process
 * group of its own within it. Signalling only the leader's group would miss those jobs, so on
 * Linux every live process whose session is the terminal's is signalled (read from
 * `/proc/<pid>/stat`); elsewhere the leader's process group is. A process that leaves the
 * session (`setsid`) is not found this way.
 *
 * Uses `node:fs` and `process.kill`, which Node, Deno and Bun all provide.
 */
import { readdirSync, readFileSync } from "node:fs";
import { constants } from "node:os";
import type { Pty } from "./pty.ts";

const LINUX = process.platform === "linux";

/** The live (not zombie) processes of session `sid`; `undefined` where `/proc` is not there. */
function sessionMembers(sid: number): number[] | undefined {
  if (!LINUX) return undefined;
  let names: string[];
  try {
    names = readdirSync("/proc");
  } catch {
    return undefined;
  }
  const members: number[] = [];
  for (const name of names) {
    const first = name.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "latin1");
    } catch {
      continue; // it exited meanwhile
    }
    // "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ", 4);
    if (fields[0] === "Z" || fields[0] === "X") continue;
    if (Number(fields[3]) === sid) members.push(Number(name));
  }
  return members;
}

/** Sends `signal` to every process of the terminal session led by `sid`; false if none got it. */
export function signalSession(sid: number, signal: "SIGHUP" | "SIGKILL"): boolean {
  let delivered = false;
  try {
    process.kill(-sid, signal);
    delivered = true;
  } catch { /* the leader's group is gone */ }
  for (const pid of sessionMembers(sid) ?? []) {
    try {
      process.kill(pid, signal);
      delivered = true;
    } catch { /* exited meanwhile */ }
  }
  return delivered;
}

/** Whether any process of the terminal session led by `sid` is still alive. */
export function sessionAlive(sid: number): boolean {
  const members = sessionMembers(sid);
  if (members) return members.length > 0;
  try {
    process.kill(-sid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The name of signal number `n` (`SIGHUP` for 1), or `null` for none. */
export function signalName(n: number | undefined | null): string | null {
  if (!n) return null;
  for (const [name, number] of Object.entries(constants.signals)) if (number === n) return name;
  return `SIG${n}`;
}

/**
 * The {@linkcode Pty} of a program that leads its own session on the PTY (`pid`, as every host
 * here starts it): the session signalled and probed as above, `io` the host's own.
 */
export function sessionPty(
  pid: number,
  io: Pick<Pty, "write" | "queuedInput" | "resize" | "close">,
): Pty {
  return {
    pid,
    write: io.write,
    queuedInput: io.queuedInput,
    resize: io.resize,
    signal: (signal) => signalSession(pid, signal),
    alive: () => sessionAlive(pid),
    close: io.close,
  };
}
