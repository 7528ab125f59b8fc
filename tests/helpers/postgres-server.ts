/**
 * A real PostgreSQL server for a test: `initdb` in a temp dir of its own, `postgres` listening on
 * 127.0.0.1 (a free port) and on a Unix socket in that dir, stopped (and its dir removed) by
 * {@linkcode PostgresServer.stop}, and also when the process exits, whatever the tests did.
 *
 * The binaries are the machine's (`/usr/lib/postgresql/<version>/bin`, or `pg_ctl` on `PATH`);
 * the runner (scripts/test-prerequisites.ts) installs them where they are missing. `initdb` and
 * `postgres` refuse to run as root: as root they run as the `postgres` user (or `nobody`) through
 * `runuser`, in a dir under /tmp that user owns (the runner's own temp dirs are closed to it).
 * Several files may each start a server: each has its own dir and port. Node, Deno and Bun run
 * this file (`node:child_process`).
 */
import { spawn, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { oncePerRun } from "./once-per-run.ts";
import { listenPort } from "./ports.ts";

/**
 * `runuser`, found where util-linux puts it: a root shell's `PATH` has `/usr/sbin`, but a runner
 * started with a user's `PATH` (or `env -i`) may not.
 */
export const RUNUSER: string =
  ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"]
    .find((path) => existsSync(path)) ?? "runuser";

/** Where the machine's PostgreSQL server binaries are: the newest version's `bin`, or undefined. */
export function findPostgresBin(): string | undefined {
  const base = "/usr/lib/postgresql";
  if (existsSync(base)) {
    const versions = readdirSync(base)
      .filter((v) => existsSync(join(base, v, "bin", "initdb")))
      .sort((a, b) => Number(b) - Number(a));
    if (versions.length > 0) return join(base, versions[0], "bin");
  }
  const found = spawnSync("sh", ["-c", "command -v pg_ctl"], { encoding: "utf8" });
  const path = found.stdout?.trim();
  return found.status === 0 && path ? path.slice(0, path.lastIndexOf("/")) : undefined;
}

/** The unprivileged user that runs the server when this process is root. */
function serverUser(): { name: string; uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  for (const name of ["postgres", "nobody"]) {
    const id = spawnSync("id", ["-u", name], { encoding: "utf8" });
    const gid = spawnSync("id", ["-g", name], { encoding: "utf8" });
    if (id.status === 0 && gid.status === 0) {
      return { name, uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
    }
  }
  throw new Error("running as root, and neither a postgres nor a nobody user to run PostgreSQL");
}

/**
 * A cluster `initdb` made once per test run (`oncePerRun`), which each server of the run starts
 * from a copy of: `initdb` is most of what a server's start costs, a copy of its files a fraction.
 * Without the runner's shared folder (one file run on its own), none: the server runs `initdb`.
 */
async function clusterTemplate(
  bin: string,
  user: ReturnType<typeof serverUser>,
): Promise<string | undefined> {
  if (!process.env.BMA_TEST_RUN_SHARED) return undefined;
  return await oncePerRun("postgres-cluster", (work) => {
    // `initdb` runs as the server's user, in a folder that user owns (the shared one is closed).
    const made = mkdtempSync(join(user ? "/tmp" : tmpdir(), "bma-pg-template-"));
    try {
      if (user) chownSync(made, user.uid, user.gid);
      chmodSync(made, 0o700);
      PostgresServer.makeCluster(bin, user, made);
      copyCluster(join(made, "data"), join(work, "data"));
    } finally {
      rmSync(made, { recursive: true, force: true });
    }
    return Promise.resolve(join(work, "data"));
  }, 60_000);
}

/** Copies a cluster's files with their owner and modes (the server's user, 0700 as made). */
function copyCluster(from: string, to: string): void {
  const done = spawnSync("cp", ["-a", from, to], { encoding: "utf8" });
  if (done.status !== 0) throw new Error(`cp -a ${from} ${to} failed: ${done.stderr}`);
}

const running = new Set<PostgresServer>();
let exitHook = false;

/** A PostgreSQL server of this process. */
export class PostgresServer {
  /** Its temp dir: the data dir, its log, and its Unix socket. */
  readonly dir: string;
  /** The TCP port it listens on (127.0.0.1). */
  readonly port: number;
  readonly #bin: string;
  readonly #user: ReturnType<typeof serverUser>;
  #up = false;

  private constructor(dir: string, port: number, bin: string, user: ReturnType<typeof serverUser>) {
    this.dir = dir;
    this.port = port;
    this.#bin = bin;
    this.#user = user;
  }

  /** Makes a fresh cluster (a copy of the run's, or by `initdb`) and starts it (1–10 s). */
  static async start(): Promise<PostgresServer> {
    const bin = findPostgresBin();
    if (bin === undefined) {
      throw new Error(
        "no PostgreSQL server binaries (initdb, pg_ctl): install the postgresql package",
      );
    }
    const user = serverUser();
    // As root, under /tmp: the runner's temp dir (mode 0700, root's) is closed to that user.
    const dir = mkdtempSync(join(user ? "/tmp" : tmpdir(), "bma-pg-"));
    if (user) chownSync(dir, user.uid, user.gid);
    chmodSync(dir, 0o700);
    const server = new PostgresServer(dir, await listenPort(), bin, user);
    running.add(server);
    if (!exitHook) {
      exitHook = true;
      // Nothing of a server is left running, whatever the tests did (a failure, an exit).
      process.on("exit", () => {
        for (const left of running) left.#halt("immediate");
      });
    }
    try {
      const template = await clusterTemplate(bin, user);
      if (template === undefined) server.#run("initdb", server.#initdbArgs(server.dataDir));
      else copyCluster(template, server.dataDir);
      server.#startServer();
    } catch (error) {
      await server.stop();
      throw error;
    }
    return server;
  }

  /** The data dir. */
  get dataDir(): string {
    return join(this.dir, "data");
  }

  /** A URL of its database over TCP. */
  get url(): string {
    return `postgres://bma@127.0.0.1:${this.port}/postgres`;
  }

  /** A URL of its database over its Unix socket. */
  get socketUrl(): string {
    return `postgres://bma@/postgres?host=${encodeURIComponent(this.dir)}&port=${this.port}`;
  }

  /** The Unix socket's path. */
  get socketPath(): string {
    return join(this.dir, `.s.PGSQL.${this.port}`);
  }

  /** Whether it is running (as far as this process started and stopped it). */
  get up(): boolean {
    return this.#up;
  }

  /**
   * Stops it as a crash does (`pg_ctl -m immediate stop`): every connection is cut at once. The
   * process goes on meanwhile (its queries in flight meet the crash).
   */
  crash(): Promise<void> {
    const path = join(this.#bin, "pg_ctl");
    const args = ["-D", this.dataDir, "-m", "immediate", "-w", "stop"];
    const [command, argv] = this.#user
      ? [RUNUSER, ["-u", this.#user.name, "--", path, ...args]]
      : [path, args];
    return new Promise((resolve, reject) => {
      const child = spawn(command, argv, { cwd: this.dir, stdio: "ignore" });
      child.once("error", reject);
      child.once("exit", (code) => {
        this.#up = false;
        if (code === 0) resolve();
        else reject(new Error(`pg_ctl stop -m immediate failed (${code})`));
      });
    });
  }

  /** Starts it again on the same data dir and port (after {@linkcode PostgresServer.crash}). */
  restart(): void {
    if (existsSync(join(this.dataDir, "postmaster.pid"))) return;
    this.#startServer();
  }

  /** Stops it and removes its dir. */
  stop(): Promise<void> {
    this.#halt("fast");
    running.delete(this);
    rmSync(this.dir, { recursive: true, force: true });
    return Promise.resolve();
  }

  #startServer(): void {
    const options = [
      `-p ${this.port}`,
      `-k ${this.dir}`,
      "-c listen_addresses=127.0.0.1",
      // A test server: no fsync (a crash here is the process's, not the machine's), small.
      "-c fsync=off",
      "-c full_page_writes=off",
      "-c shared_buffers=16MB",
      "-c max_connections=60",
    ].join(" ");
    this.#run("pg_ctl", [
      "-D",
      this.dataDir,
      "-o",
      options,
      "-l",
      join(this.dir, "log"),
      "-w",
      "-t",
      "60",
      "start",
    ]);
    this.#up = true;
  }

  #halt(mode: "fast" | "immediate"): void {
    if (!existsSync(join(this.dataDir, "postmaster.pid"))) {
      this.#up = false;
      return;
    }
    this.#run("pg_ctl", ["-D", this.dataDir, "-m", mode, "-w", "-t", "60", "stop"], true);
    this.#up = false;
  }

  /** `initdb`'s arguments for a cluster in `dataDir`. */
  #initdbArgs(dataDir: string): string[] {
    return ["-D", dataDir, "-A", "trust", "-U", "bma", "-E", "UTF8", "--locale=C", "--no-sync"];
  }

  /** A cluster made by `initdb` in `into` (a new folder), as `start` makes one. */
  static makeCluster(bin: string, user: ReturnType<typeof serverUser>, into: string): void {
    const maker = new PostgresServer(into, 0, bin, user);
    maker.#run("initdb", maker.#initdbArgs(maker.dataDir));
  }

  /** Runs a server binary as the server's user; throws with its output when it fails. */
  #run(program: string, args: string[], quiet = false): void {
    const path = join(this.#bin, program);
    const [command, argv] = this.#user
      ? [RUNUSER, ["-u", this.#user.name, "--", path, ...args]]
      : [path, args];
    const done = spawnSync(command, argv, {
      encoding: "utf8",
      cwd: this.dir,
      // The runner's stage mark stays in the environment: it finds and ends what is left.
      env: { ...process.env, LANG: "C", LC_ALL: "C" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    if (done.status !== 0 && !quiet) {
      let log = "";
      try {
        log = spawnSync("tail", ["-n", "20", join(this.dir, "log")], { encoding: "utf8" }).stdout;
      } catch { /* no log yet */ }
      throw new Error(
        `${program} failed (${
          done.status ?? done.error?.message
        }): ${done.stderr}${done.stdout}${log}`,
      );
    }
  }
}
