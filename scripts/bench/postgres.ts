/**
 * The bench's PostgreSQL server: the test rig's (tests/helpers/postgres-server.ts: a fresh
 * cluster in a temp dir, on 127.0.0.1 and a Unix socket there, run as an unprivileged user when
 * this process is root), restarted with fsync on. The rig turns fsync off, as its crashes are the
 * process's and not the machine's; a deployment keeps it on, so every commit the bench measures
 * waits for its WAL flush as it would there. `fsync` on the server's command line outranks
 * `ALTER SYSTEM`, hence the restart with the rig's other options.
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { findPostgresBin, PostgresServer, RUNUSER } from "../../tests/helpers/postgres-server.ts";

/** A started server, and what the report says of it. */
export interface BenchPostgres {
  readonly server: PostgresServer;
  readonly description: string;
}

/** Starts the server; undefined when the machine has no PostgreSQL binaries. */
export async function startBenchPostgres(): Promise<BenchPostgres | undefined> {
  const bin = findPostgresBin();
  if (bin === undefined) return undefined;
  const server = await PostgresServer.start();
  const options = [
    `-p ${server.port}`,
    `-k ${server.dir}`,
    "-c listen_addresses=127.0.0.1",
    "-c shared_buffers=16MB",
    "-c max_connections=60",
  ].join(" ");
  // The log to a file: the server keeps no pipe of ours open (spawnSync waits for them).
  const args = [
    "-D",
    server.dataDir,
    "-o",
    options,
    "-l",
    join(server.dir, "log"),
    "-w",
    "-t",
    "60",
    "-m",
    "fast",
    "restart",
  ];
  const asRoot = process.getuid?.() === 0;
  // As the rig does: as root, the server runs as the user that owns its dir.
  const owner = asRoot
    ? spawnSync("stat", ["-c", "%U", server.dir], { encoding: "utf8" }).stdout.trim()
    : "";
  const pgCtl = join(bin, "pg_ctl");
  const restarted = spawnSync(
    asRoot ? RUNUSER : pgCtl,
    asRoot ? ["-u", owner, "--", pgCtl, ...args] : args,
    {
      cwd: server.dir,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 120_000,
      env: { ...process.env, LANG: "C", LC_ALL: "C" },
    },
  );
  const version = spawnSync(join(bin, "postgres"), ["--version"], { encoding: "utf8" }).stdout
    .trim();
  const fsync = restarted.status === 0
    ? "fsync on"
    : `fsync OFF (the restart with fsync on failed: ${restarted.stderr.trim().split("\n")[0]})`;
  return {
    server,
    description: `${version}, a fresh cluster of the bench's own on 127.0.0.1 (${fsync}, ` +
      "synchronous_commit on, shared_buffers 16MB), stopped at the end",
  };
}
