/**
 * What the suite needs from the machine besides what `npm ci` installs: `git` (the credential
 * helper test runs the real one) and a PostgreSQL server's binaries (the PostgreSQL store tests
 * start a real server: `initdb`, `pg_ctl`, in `/usr/lib/postgresql/<version>/bin` on Debian). Where it is missing, the runner installs the distribution's
 * package when it can (root, with apt-get) and says so; otherwise it stops and says what to
 * install. Chromium comes from npm (`@sparticuz/chromium`), so it is not listed here.
 */
import { spawnSync } from "node:child_process";
import { findPostgresBin } from "../tests/helpers/postgres-server.ts";

const onPath = (program: string) =>
  spawnSync("sh", ["-c", `command -v ${program}`], { stdio: "ignore" }).status === 0;

/** Whether the machine has `program` (the server's binaries are off `PATH` on Debian). */
const has = (program: string) =>
  program === "initdb" ? findPostgresBin() !== undefined : onPath(program);

/** Debian packages of the programs the suite runs, by program. */
const PACKAGES: Record<string, string> = { git: "git", initdb: "postgresql" };

/** Installs what is missing, or returns the message that says what to install. */
export function ensurePrerequisites(log: (line: string) => void): string | undefined {
  const missing = Object.keys(PACKAGES).filter((program) => !has(program));
  if (missing.length === 0) return undefined;
  const packages = missing.map((program) => PACKAGES[program]);
  const root = process.getuid?.() === 0;
  if (!root || !onPath("apt-get")) {
    return `the tests need ${missing.join(", ")}: install ${packages.join(", ")} and run again`;
  }
  log(`installing ${packages.join(", ")} (apt-get): the tests run ${missing.join(", ")}`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const args of [["update"], ["install", "-y", "--no-install-recommends", ...packages]]) {
    const done = spawnSync("apt-get", args, { stdio: ["ignore", "inherit", "inherit"], env });
    if (done.status !== 0) return `apt-get ${args[0]} failed (exit ${done.status})`;
  }
  const still = missing.filter((program) => !has(program));
  return still.length ? `still missing after apt-get: ${still.join(", ")}` : undefined;
}
