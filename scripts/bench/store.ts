/**
 * The harness store's cost per durable event: the batch an accepted `session.event` writes (the
 * harness's epoch check and the stored event) into the memory store and into the SQLite file
 * store (each driver of each runtime; WAL, `synchronous` NORMAL and FULL), one batch after
 * another, and with group commit (64 batches a turn), and, when the bench runs a PostgreSQL
 * server, into a PostgreSQL table the same two ways, in a child process per runtime
 * (store-child.ts). Ratios are against the memory store of the same child.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { build } from "esbuild";
import { bin, HAS_TASKSET, ROOT, type Runtime } from "./procs.ts";

const CHILD = join(ROOT, "scripts/bench/store-child.ts");
const NODE_BUNDLE = join(ROOT, "node_modules/.cache/bma-bench/store-child.mjs");

/** The stores measured on each runtime: label → kind[:driver[:synchronous]]. */
export const STORE_CASES: Record<Runtime, Record<string, string>> = {
  node: {
    memory: "memory",
    "sqlite (libsql)": "sqlite:libsql",
    "sqlite, full sync (default driver)": "sqlite:libsql:full",
    "sqlite, group commit of 64 (default driver)": "sqlite:libsql:normal:grouped",
  },
  deno: {
    memory: "memory",
    "sqlite (node:sqlite)": "sqlite:node",
    "sqlite (libsql)": "sqlite:libsql",
    "sqlite, full sync (default driver)": "sqlite:node:full",
    "sqlite, group commit of 64 (default driver)": "sqlite:node:normal:grouped",
  },
  bun: {
    memory: "memory",
    "sqlite (bun:sqlite)": "sqlite:bun",
    "sqlite (libsql)": "sqlite:libsql",
    "sqlite, full sync (default driver)": "sqlite:bun:full",
    "sqlite, group commit of 64 (default driver)": "sqlite:bun:normal:grouped",
  },
};

/**
 * The PostgreSQL store's cases, on every runtime, when the bench runs a PostgreSQL server
 * (main.ts): one batch after another, and 64 a turn through group commit.
 */
export const POSTGRES_STORE_CASES: Record<string, string> = {
  "postgres": "postgres",
  "postgres, group commit of 64": "postgres:postgres:normal:grouped",
};

/** Events per second by store label, one figure per run. */
export type StoreResults = Record<string, number[]>;

/** Runs the store benchmark on `runtime`. */
export async function runStoreSuite(
  runtime: Runtime,
  options: {
    durationMs: number;
    warmupMs: number;
    runs: number;
    cpu?: number;
    /** A PostgreSQL database: adds {@linkcode POSTGRES_STORE_CASES}, each run in a new table. */
    postgresUrl?: string;
  },
): Promise<StoreResults> {
  const cases = {
    ...STORE_CASES[runtime],
    ...(options.postgresUrl ? POSTGRES_STORE_CASES : {}),
  };
  const specs = Object.entries(cases).map(([label, kind]) => `${label}=${kind}`);
  const args = [
    String(options.durationMs),
    String(options.warmupMs),
    String(options.runs),
    ...specs,
  ];
  let command: string;
  let argv: string[];
  if (runtime === "node") {
    // As the npm package runs: a bundle of the sources, not tsx (see procs.ts).
    await build({
      entryPoints: [CHILD],
      outfile: NODE_BUNDLE,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "error",
    });
    [command, argv] = [process.execPath, [NODE_BUNDLE, ...args]];
  } else if (runtime === "deno") {
    [command, argv] = [bin("deno"), ["run", "-A", "--quiet", CHILD, ...args]];
  } else {
    [command, argv] = [bin("bun"), [CHILD, ...args]];
  }
  if (options.cpu !== undefined && HAS_TASKSET) {
    argv = ["-c", String(options.cpu), command, ...argv];
    command = "taskset";
  }
  const child = spawn(command, argv, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    // Not on the command line: a label=kind spec splits on ":" and "=".
    env: { ...process.env, BMA_BENCH_POSTGRES_URL: options.postgresUrl ?? "" },
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => (out += chunk));
  child.stderr.on("data", (chunk) => (err = (err + chunk).slice(-4000)));
  const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
  const line = out.trim().split("\n").pop() ?? "";
  if (code !== 0 || !line.startsWith("{")) {
    throw new Error(`store bench on ${runtime} exited with ${code}: ${err}`);
  }
  return (JSON.parse(line) as { results: StoreResults }).results;
}
