/**
 * Linux cgroup v2 for the processes of a session: every process the executor starts enters a
 * cgroup of its own (a leaf under the session's cgroup) before it execs, so everything it
 * starts stays in that cgroup, a `setsid`/double-forked daemon included, and the executor can
 * list, signal and kill all of it (`cgroup.kill`) and tell when none is left (`populated 0`,
 * which does not count zombies).
 *
 * Used where the executor's own cgroup (found through `/proc/self/cgroup` and the cgroup2
 * mount in `/proc/self/mountinfo`) lets it create child cgroups and move processes into them:
 * a delegated systemd unit or user session, or a container with a writable cgroup2 mount.
 * Elsewhere {@linkcode CgroupTree.open} answers undefined and processes are tracked by process
 * group only.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { processAlive } from "./process-probe.node.ts";

/** The directory of the executor's own cgroup (cgroup v2), when there is one. */
export function ownCgroupDirectory(): string | undefined {
  if (process.platform !== "linux") return undefined;
  let mountinfo: string;
  let membership: string;
  try {
    mountinfo = readFileSync("/proc/self/mountinfo", "utf8");
    membership = readFileSync("/proc/self/cgroup", "utf8");
  } catch {
    return undefined;
  }
  // The unified hierarchy's line is "0::<path>" (the path is relative to the cgroup namespace).
  const own = membership.split("\n").find((line) => line.startsWith("0::"))?.slice(3);
  if (!own || own.endsWith(" (deleted)")) return undefined;
  for (const line of mountinfo.split("\n")) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const separator = line.indexOf(" - ");
    if (separator < 0 || line.slice(separator + 3).split(" ")[0] !== "cgroup2") continue;
    const fields = line.slice(0, separator).split(" ");
    const root = unescapeMountinfo(fields[3] ?? "");
    const mountPoint = unescapeMountinfo(fields[4] ?? "");
    if (!mountPoint) continue;
    if (root === "/") return join(mountPoint, own);
    if (own === root) return mountPoint;
    if (own.startsWith(`${root}/`)) return join(mountPoint, own.slice(root.length));
  }
  return undefined;
}

/** mountinfo escapes space, tab, newline and backslash as `\ooo`. */
function unescapeMountinfo(field: string): string {
  return field.replace(
    /\\([0-7]{3})/g,
    (_, octal: string) => String.fromCharCode(parseInt(octal, 8)),
  );
}

/** One cgroup directory. */
export class Cgroup {
  readonly path: string;

  constructor(path: string) {
    this.path = path;
  }

  /** The file a process writes its pid to in order to enter the cgroup. */
  get procsFile(): string {
    return join(this.path, "cgroup.procs");
  }

  /** The processes in this cgroup (not its children), zombies excluded. */
  pids(): number[] {
    let text: string;
    try {
      text = readFileSync(this.procsFile, "utf8");
    } catch {
      return [];
    }
    const pids: number[] = [];
    for (const line of text.split("\n")) {
      const pid = Number(line);
      if (line && Number.isInteger(pid) && pid > 0) pids.push(pid);
    }
    return pids;
  }

  /** Whether any process is in the cgroup or below it; undefined once the cgroup is gone. */
  populated(): boolean | undefined {
    try {
      return /^populated 1$/m.test(readFileSync(join(this.path, "cgroup.events"), "utf8"));
    } catch {
      return undefined;
    }
  }

  /** Sends `signal` to every process in the cgroup; true when any received it. */
  signal(signal: NodeJS.Signals): boolean {
    let delivered = false;
    for (const pid of this.pids()) {
      try {
        process.kill(pid, signal);
        delivered = true;
      } catch { /* exited meanwhile */ }
    }
    return delivered;
  }

  /** SIGKILL to every process in the cgroup and below, forks in flight included. */
  kill(): void {
    try {
      writeFileSync(join(this.path, "cgroup.kill"), "1");
      return;
    } catch { /* before Linux 5.14: one by one (the caller repeats until none is left) */ }
    this.signal("SIGKILL");
  }

  /** A child cgroup. */
  child(name: string): Cgroup {
    const child = new Cgroup(join(this.path, name));
    mkdirSync(child.path);
    return child;
  }

  /** Removes the (empty) cgroup; false while processes or child cgroups remain. */
  remove(): boolean {
    try {
      rmdirSync(this.path);
      return true;
    } catch (error) {
      return (error as { code?: string }).code === "ENOENT";
    }
  }
}

/**
 * The cgroups of one executor: a cgroup per session under the executor's own cgroup (or a
 * given parent), each process in a leaf of its session's.
 */
export class CgroupTree {
  readonly #parent: Cgroup;
  readonly #prefix = `bma-${process.pid}-${randomBytes(4).toString("hex")}`;
  #sessions = 0;

  private constructor(parent: Cgroup) {
    this.#parent = parent;
  }

  /**
   * The tree under `parent` (default: the executor's own cgroup), once a process has been seen
   * to enter a cgroup there; undefined where that is not possible.
   */
  static async open(parent?: string): Promise<CgroupTree | undefined> {
    const dir = parent ?? ownCgroupDirectory();
    if (!dir || !existsSync(join(dir, "cgroup.procs"))) return undefined;
    const tree = new CgroupTree(new Cgroup(dir));
    sweepStale(dir);
    let probe: Cgroup;
    try {
      probe = tree.#parent.child(`${tree.#prefix}-probe`);
    } catch {
      return undefined;
    }
    try {
      const entered = await new Promise<boolean>((resolve) => {
        const child = spawn("/bin/sh", ["-c", 'echo $$ > "$1"', "sh", probe.procsFile], {
          stdio: "ignore",
          env: {},
        });
        child.once("error", () => resolve(false));
        child.once("exit", (code) => resolve(code === 0));
      });
      return entered ? tree : undefined;
    } finally {
      probe.remove();
    }
  }

  /** A new cgroup for one session. */
  session(): Cgroup {
    return this.#parent.child(`${this.#prefix}-s${++this.#sessions}`);
  }
}

const OURS = /^bma-(\d+)-[0-9a-f]{8}-/;

/**
 * Removes the cgroups an executor that is no longer running (killed, crashed) left under
 * `dir`, killing what still runs in them: processes of sessions that ended with it.
 */
function sweepStale(dir: string): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of entries) {
    const owner = OURS.exec(name)?.[1];
    if (!owner || Number(owner) === process.pid || processAlive(Number(owner))) continue;
    const stale = new Cgroup(join(dir, name));
    if (stale.populated()) stale.kill();
    removeTree(stale.path);
  }
}

/** Removes a cgroup and its children, deepest first; what is still busy stays. */
function removeTree(path: string): void {
  let entries: string[] = [];
  try {
    entries = readdirSync(path, { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name);
  } catch { /* gone */ }
  for (const child of entries) removeTree(join(path, child));
  new Cgroup(path).remove();
}

/**
 * The argv that runs `argv` inside `cgroup`: a shell writes its own pid to `cgroup.procs`, then
 * execs the program (same pid), so nothing the program starts is ever outside the cgroup. A
 * process that cannot enter exits 125 without running the program.
 */
export function inCgroup(cgroup: Cgroup, argv: readonly string[]): string[] {
  return [
    "/bin/sh",
    "-c",
    'echo $$ > "$0" || { echo "bma-executor: cannot enter the session cgroup" >&2; exit 125; }; exec "$@"',
    cgroup.procsFile,
    ...argv,
  ];
}
