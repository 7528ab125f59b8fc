/**
 * `npm run bench`: the SDK's benchmarks, measured in one run, side by side with their
 * baselines, printed as tables of figures and ratios (every ratio against a baseline measured
 * in the same run). Not a test: nothing here asserts a time.
 *
 *   npm run bench [-- --quick] [--only calls,scale,binary,workers,store,edge,failover,reconnect]
 *                 [--runtimes node,deno,bun] [--failover-runs N] [--failover-executors N] [--cuts N]
 *                 [--duration MS] [--runs N] [--warmup MS] [--sizes 1000,5000,10000] [--window MS]
 *                 [--edge-sizes 100,250,500,...] [--edge-interval MS]
 *                 [--cpu N | --no-pin] [--compare DIR] [--cases ID,...] [--json FILE] [--help]
 *
 * `--compare DIR` runs the SDK's cases of suites 1 and 2 from another checkout too (DIR: its
 * root, with node_modules), each taking turns with this checkout's, and prints both side by
 * side: a before/after of a change measured in one run. `--cases` keeps only some cases of suites
 * 1 and 2 (ids: ws-echo, tool-ws, unix-echo, tool-unix, ndjson-echo, tool-memory, events, events-sqlite,
 * events-sqlite-full, events-postgres, mcp-memory, mcp-ws).
 *
 * Suites 2, 6 and 8 start a PostgreSQL server of their own (tests/helpers/postgres-server.ts: a
 * fresh cluster in a temp dir, on 127.0.0.1 and a Unix socket there, fsync turned on), stopped at the
 * end; without the machine's PostgreSQL binaries their PostgreSQL cases are skipped, said so.
 *
 * 1. Tool-call round trips (harness `callTool` → executor handler → result at the harness), 1
 *    and 64 in flight, in memory, over WebSocket and over a Unix socket, on Node, Deno and Bun;
 *    baselines: a raw WebSocket / Unix-socket echo of a frame of the same size on the same
 *    runtime, and on Node the MCP TypeScript SDK's tools/call in memory and over WebSocket.
 * 2. Durable session events per second (executor emits, harness acknowledges), 1 in flight
 *    and windowed, without a store, with the SQLite store (synchronous NORMAL and FULL) and with
 *    the PostgreSQL store (over TCP 127.0.0.1, group commit when windowed); the
 *    harness's heap per durable event its session log keeps, and its growth over 50,000 events
 *    (the log keeps the newest 10,000 by default).
 *    Then, per runtime, the latency of each operation of suites 1 and 2 (a tool call, an echo, an
 *    MCP call, a durable event), at 1 and 64 in flight: p50 / p99 / p99.9, the median over runs.
 * 3. Harness scale: N executors on one Node harness (memory against bare `ws`, heartbeat CPU,
 *    re-registration after a restart).
 * 4. The compiled executor: size, and spawn-to-registered time.
 * 5. The Workers harness bundle, minified and gzipped (scripts/bench/workers-bundle.ts).
 * 6. The harness store's writes per durable event: memory against SQLite and PostgreSQL
 *    (scripts/bench/store.ts), and the bound each store's commit sets on suite 2's ratios.
 * 7. The edge harness's capacity: N executors on one `HarnessObject` in workerd (Miniflare) —
 *    memory and CPU per executor and per heartbeat, tool-call latency as it fills, and where it
 *    stops keeping up (scripts/bench/edge.ts). `--edge-sizes` and `--edge-interval` (the
 *    heartbeat interval the object hands out, ms) set its steps.
 * 8. Failover (scripts/bench/failover.ts): two `bma-harness serve --standby` on one PostgreSQL
 *    table, N executors through a readiness proxy; `kill -9` of the active → every executor's
 *    events acknowledged by the standby. At the default lease and at `--store-renew-ms 1000`;
 *    `--failover-runs` repetitions each (default 3, 1 with --quick), median and max.
 * 9. Reconnect-to-resume (scripts/bench/reconnect.ts): a Node harness and an executor through a
 *    proxy that cuts both sockets, under durable events and tool calls in flight; per cut, the
 *    time to the executor resumed and to its first event acknowledged and first tool result,
 *    p50 / p99 / max over `--cuts` cuts (default 100, 30 with --quick), with the default backoff
 *    and with `reconnect: { initialDelayMs: 0 }`; beside them suite 3's memory per executor at
 *    10,000 when it ran.
 *
 * Sequential figures on a small VM swing with core placement, so both processes of every
 * case of suites 1 and 2, candidate and baseline alike, run pinned to one CPU (`taskset -c`)
 * when taskset exists; the output says how.
 */
import { cpus, loadavg } from "node:os";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { type CallResults, runCallSuite } from "./calls.ts";
import { printCallSuites } from "./calls-report.ts";
import { runScaleSuite, type ScaleResult } from "./scale.ts";
import { type BinaryResult, runBinarySuite } from "./binary.ts";
import { bin, HAS_TASKSET, type Runtime } from "./procs.ts";
import { int, kb, median, rate, Report, type Row, table, verdict } from "./report.ts";
import { POSTGRES_STORE_CASES, runStoreSuite, STORE_CASES, type StoreResults } from "./store.ts";
import {
  canUnshareUts,
  type FailoverCase,
  type FailoverResults,
  runFailoverSuite,
} from "./failover.ts";
import type { PostgresServer } from "../../tests/helpers/postgres-server.ts";
import { startBenchPostgres } from "./postgres.ts";

const { values: flags } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    runtimes: { type: "string" },
    duration: { type: "string" },
    runs: { type: "string" },
    warmup: { type: "string" },
    sizes: { type: "string" },
    window: { type: "string" },
    "edge-sizes": { type: "string" },
    "edge-interval": { type: "string" },
    cpu: { type: "string" },
    "no-pin": { type: "boolean", default: false },
    compare: { type: "string" },
    cases: { type: "string" },
    json: { type: "string" },
    "failover-runs": { type: "string" },
    "failover-executors": { type: "string" },
    cuts: { type: "string" },
    help: { type: "boolean", default: false },
  },
});

if (flags.help) {
  // The usage is this module's own comment.
  const source = readFileSync(fileURLToPath(import.meta.url), "utf8");
  const usage = source.slice(source.indexOf("/**") + 3, source.indexOf("*/"));
  console.log(usage.split("\n").map((line) => line.replace(/^ \* ?/, "")).join("\n").trim());
  process.exit(0);
}
const compare = flags.compare ? resolve(flags.compare) : undefined;
if (compare && !existsSync(join(compare, "scripts/bench/child.ts"))) {
  console.error(`--compare ${compare}: no scripts/bench/child.ts there`);
  process.exit(2);
}

const quick = flags.quick!;
const suites = new Set(
  (flags.only ?? "calls,scale,binary,workers,store,edge,failover,reconnect").split(","),
);
const runtimes = (flags.runtimes ?? "node,deno,bun").split(",") as Runtime[];
const durationMs = Number(flags.duration ?? (quick ? 1000 : 3000));
// The targets at 1 in flight are read as the median of five runs per runtime.
const runs = Number(flags.runs ?? (quick ? 1 : 5));
// Until the JIT and the heap settle, candidate and baseline alike: with `--trace-opt`, V8 still
// optimizes and deoptimizes the tool-call path for the first seconds of calls one at a time
// (docs/benchmarks.md has the measurement), and a harness or executor runs for far longer.
const warmupMs = Number(flags.warmup ?? (quick ? 1000 : 6000));
const sizes = (flags.sizes ?? (quick ? "1000" : "1000,5000,10000")).split(",").map(Number);
// One heartbeat interval (15 s, the default): every executor heartbeats exactly once in it.
const windowMs = Number(flags.window ?? 15000);
const cpu = flags["no-pin"] || !HAS_TASKSET ? undefined : Number(flags.cpu ?? 0);

const log = (line: string) => process.stderr.write(`  · ${line}\n`);

// ---- suites ----------------------------------------------------------------------------------

function versions(): string {
  const v = (command: string, args: string[]) =>
    (spawnSync(command, args, { encoding: "utf8" }).stdout ?? "").split("\n")[0].trim();
  return [
    `node ${process.versions.node}`,
    v(bin("deno"), ["--version"]),
    `bun ${v(bin("bun"), ["--version"])}`,
  ].join(", ");
}

const report = new Report();
const { print, check } = report;

const json: Record<string, unknown> = {
  date: new Date().toISOString(),
  quick,
  durationMs,
  runs,
  cpu: cpu ?? null,
};

print(
  `bma-executor-sdk benchmarks — ${new Date().toISOString().slice(0, 16)}Z, ${
    quick ? "quick" : "full"
  }: ${runs} run${runs > 1 ? "s" : ""} × ${durationMs / 1000} s per case after ${
    warmupMs / 1000
  } s of warm-up per case and mode (median${runs > 1 ? ", ± half the range" : ""})`,
);
print(`machine: ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}); ${versions()}`);
print(`load average at the start: ${loadavg().map((l) => l.toFixed(2)).join(", ")}`);

// One PostgreSQL server for the suites that measure the PostgreSQL store, when the machine has
// its binaries; stopped at the end (and on any exit, by the rig itself).
let postgres: PostgresServer | undefined;
if (["calls", "store", "failover"].some((s) => suites.has(s))) {
  log("starting a PostgreSQL server");
  const started = await startBenchPostgres();
  postgres = started?.server;
  print(
    `PostgreSQL: ${
      started?.description ??
        "no server binaries (initdb, pg_ctl) on this machine: the PostgreSQL cases are skipped"
    }`,
  );
}
json.postgres = postgres !== undefined;

if (suites.has("calls")) {
  const all: Partial<Record<Runtime, CallResults>> = {};
  for (const runtime of runtimes) {
    all[runtime] = await runCallSuite(runtime, {
      durationMs,
      runs,
      warmupMs,
      cpu,
      log,
      ...(compare ? { compare } : {}),
      ...(flags.cases ? { cases: flags.cases.split(",") } : {}),
      ...(postgres ? { postgresUrl: postgres.url } : {}),
    });
  }
  json.calls = all;
  printCallSuites(report, all, { cols: runtimes, compare, cpu });
}

if (suites.has("scale")) {
  print();
  print(
    `3. Harness scale (one Node harness, executors in separate processes of 2,500 ExecutorClients, real WebSockets; heartbeat interval 15 s, the default)`,
  );
  const results: ScaleResult[] = await runScaleSuite({ sizes, windowMs, log });
  json.scale = results;
  print(table(
    [
      "executors",
      "bare ws heap/conn",
      "harness heap/exec",
      "ratio (≤ 3)",
      "bare ws RSS/conn",
      "harness RSS/exec",
      "heartbeats/s",
      "harness CPU (< 20%)",
      "re-register all",
    ],
    results.map((r) => [
      int(r.n),
      kb(r.rawHeapPerConn),
      kb(r.heapPerExecutor),
      verdict(r.heapPerExecutor / r.rawHeapPerConn, 3, false),
      kb(r.rawRssPerConn),
      kb(r.rssPerExecutor),
      int(r.heartbeatsPerSecond),
      `${(r.cpuFraction * 100).toFixed(1)}% ${r.cpuFraction < 0.2 ? "ok" : "MISS"}`,
      `${(r.reregisterMs / 1000).toFixed(1)} s (${
        (r.reregisterAfterListenMs / 1000).toFixed(1)
      } s after listening)`,
    ]),
  ));
  print(
    `   heap and RSS: after a full GC, growth from the idle server to N connected, divided by N; CPU: user+system of the harness process over ${
      windowMs / 1000
    } s, as a share of one core; re-register: from the old harness's exit (graceful, 1001) to all N registered on a new process on the same port (executors reconnect with their default backoff).`,
  );
  check(
    "harness heap per executor ≤ 3× bare ws heap per idle connection",
    results.map((r) => [int(r.n), r.heapPerExecutor / r.rawHeapPerConn]),
    3,
    false,
  );
  const big = results.find((r) => r.n === 10_000) ?? results[results.length - 1];
  if (big) {
    check(
      `${int(big.n)} executors heartbeating < 20% of one core`,
      [[int(big.n), big.cpuFraction]],
      0.2,
      false,
    );
  }
}

if (suites.has("binary")) {
  print();
  print("4. The compiled executor (bun build --compile --minify cli/executor.bun.ts)");
  const starts = quick ? 3 : 7;
  let result: BinaryResult | undefined;
  try {
    result = await runBinarySuite(starts);
  } catch (error) {
    print(`   not measured: ${(error as Error).message}`);
  }
  if (result) {
    json.binary = result;
    const s = result.startMs;
    print(table(["", ""], [
      ["  size", `${(result.bytes / 1024 / 1024).toFixed(1)} MB (${int(result.bytes)} bytes)`],
      ["  build time", `${(result.buildMs / 1000).toFixed(1)} s`],
      [
        `  spawn → registered at a local harness (${starts} starts)`,
        `median ${median(s).toFixed(0)} ms, min ${Math.min(...s).toFixed(0)}, max ${
          Math.max(...s).toFixed(0)
        }`,
      ],
    ]));
    check("binary registered within 150 ms of start (median)", [["ms", median(s)]], 150, false);
  }
}

if (suites.has("workers")) {
  print();
  print("5. The Workers harness bundle (scripts/bench/workers-bundle.ts: esbuild, minified, esm)");
  try {
    const { buildWorkersBundle } = await import("./workers-bundle.ts");
    const bundle = await buildWorkersBundle();
    json.workers = { bytes: bundle.bytes, gzipBytes: bundle.gzipBytes };
    print(`   ${kb(bundle.bytes)} minified, ${kb(bundle.gzipBytes)} gzipped`);
    check("Workers bundle ≤ 110 KB gzipped", [["KB", bundle.gzipBytes / 1024]], 110, false);
  } catch (error) {
    print(`   not measured: ${(error as Error).message.split("\n")[0]}`);
  }
}

/** Memory first, then the built-in drivers, libsql, and full sync last. */
function storeRank(label: string): number {
  return label === "memory"
    ? 0
    : label.startsWith("postgres")
    ? 5 + Number(label.includes("group"))
    : label.includes("group")
    ? 4
    : label.includes("full")
    ? 3
    : label.includes("libsql")
    ? 2
    : 1;
}

if (suites.has("store")) {
  print();
  print(
    "6. Harness store: durable events written per second (the batch an accepted session.event needs: the epoch check and the stored event; one batch after another, or the 64 events of a turn in one batch, several to a row, with group commit)",
  );
  const all: Partial<Record<Runtime, StoreResults>> = {};
  for (const runtime of runtimes) {
    log(`store on ${runtime}`);
    try {
      all[runtime] = await runStoreSuite(runtime, {
        durationMs,
        warmupMs: warmupMs / 3,
        runs,
        cpu,
        ...(postgres ? { postgresUrl: postgres.url } : {}),
      });
    } catch (error) {
      print(`   ${runtime}: not measured: ${(error as Error).message.split("\n")[0]}`);
    }
  }
  json.store = all;
  const labels = [
    ...new Set(runtimes.flatMap((r) => [
      ...Object.keys(STORE_CASES[r]),
      ...(postgres ? Object.keys(POSTGRES_STORE_CASES) : []),
    ])),
  ].sort((a, b) => storeRank(a) - storeRank(b));
  const med = (r: Runtime, label: string) => {
    const values = all[r]?.[label];
    return values?.length ? median(values) : undefined;
  };
  const rows: Row[] = [];
  for (const label of labels) {
    rows.push([`  ${label}`, ...runtimes.map((r) => rate(all[r]?.[label]))]);
    rows.push([
      "    µs per event",
      ...runtimes.map((r) => {
        const m = med(r, label);
        return m ? (1e6 / m).toFixed(2) : "–";
      }),
    ]);
    if (label !== "memory") {
      rows.push([
        "    / memory store",
        ...runtimes.map((r) => {
          const m = med(r, label);
          const base = med(r, "memory");
          return m && base ? (m / base).toFixed(3) : "–";
        }),
      ]);
    }
  }
  print(table(["", ...runtimes], rows));
  // What the SQLite store's ratios to no store can reach at most: the harness adding nothing to
  // a durable event but this commit (1 in flight) or its share of a group's (64 in flight).
  const calls = json.calls as Partial<Record<Runtime, CallResults>> | undefined;
  const defaults: Record<Runtime, string> = {
    node: "sqlite (libsql)",
    deno: "sqlite (node:sqlite)",
    bun: "sqlite (bun:sqlite)",
  };
  const bound = (r: Runtime, mode: string, label: string) => {
    const events = calls?.[r]?.events?.[mode];
    const store = med(r, label);
    return events?.length && store ? 1 / (1 + median(events) / store) : undefined;
  };
  if (calls) {
    // And the PostgreSQL store's: its commit over TCP, one transaction per batch or per group.
    const postgresBounds: Row[] = [
      [
        "  bound on durable events, PostgreSQL / no store, 1 in flight (its commit's s per batch)",
        ...runtimes.map((r) => bound(r, "1", "postgres")?.toFixed(2) ?? "–"),
      ],
      [
        "  the same, 64 in flight, with the group commit's s per batch (target ≥ 0.5)",
        ...runtimes.map((r) => bound(r, "64", "postgres, group commit of 64")?.toFixed(2) ?? "–"),
      ],
    ];
    print(table(["", ...runtimes], [
      [
        "  bound on durable events, SQLite / no store, 1 in flight: 1 / (1 + no-store events/s × s per batch)",
        ...runtimes.map((r) => bound(r, "1", defaults[r])?.toFixed(2) ?? "–"),
      ],
      [
        "  the same, 64 in flight, with the group commit's s per batch",
        ...runtimes.map((r) =>
          bound(r, "64", "sqlite, group commit of 64 (default driver)")?.toFixed(2) ?? "–"
        ),
      ],
      ...(postgres ? postgresBounds : []),
    ]));
  }
  print(
    '   sqlite: one file in WAL mode, synchronous NORMAL (a committed batch survives kill -9) unless "full sync" (FULL: one fsync per batch, survives power loss); each run starts an empty store.',
  );
  if (postgres) {
    print(
      "   postgres: one transaction per batch (the epoch check and the event) over TCP 127.0.0.1 to the bench's own server, a new table per run; group commit: the 64 events of a turn in one batch and one transaction, several to a row.",
    );
  }
}

if (suites.has("edge")) {
  const interval = Number(flags["edge-interval"] ?? 2000);
  print();
  print(
    "7. Edge harness capacity (one HarnessObject in workerd through Miniflare; executors heartbeating, a brain calling tools over the brain API)",
  );
  try {
    const { runEdgeSuite } = await import("./edge.ts");
    const { edgeReport } = await import("./edge-report.ts");
    const result = await runEdgeSuite({
      sizes: (flags["edge-sizes"] ?? (quick ? "50,200" : "100,250,500,1000,2000,4000,8000,16000"))
        .split(",").map(Number),
      intervalMs: interval,
      windowIntervals: quick ? 2 : 3,
      callMs: quick ? 2000 : 5000,
      processes: 2,
      concurrency: 25,
      budgetMs: quick ? 90_000 : 360_000,
      log,
    });
    json.edge = result;
    for (const line of edgeReport(result)) print(line);
  } catch (error) {
    print(`   not measured: ${(error as Error).message.split("\n")[0]}`);
  }
}

if (suites.has("failover")) {
  print();
  print(
    "8. Failover (two `bma-harness serve --standby` on one PostgreSQL table, executors through a readiness proxy, each emitting durable events one after another; kill -9 of the active)",
  );
  if (!postgres) {
    print("   not measured: no PostgreSQL server binaries on this machine");
  } else {
    const failoverRuns = Number(flags["failover-runs"] ?? (quick ? 1 : 3));
    const executors = Number(flags["failover-executors"] ?? 5);
    try {
      const twoHosts = canUnshareUts();
      const cases: FailoverCase[] = [
        {
          label: "default lease (renewed every 5 s, stale after 15 s)",
          renewMs: undefined,
          twoHosts,
        },
        { label: "--store-renew-ms 1000 (stale after 3 s)", renewMs: 1000, twoHosts },
      ];
      if (twoHosts) {
        cases.push({
          label: "default lease, both on one host (the pid probe)",
          renewMs: undefined,
          twoHosts: false,
        });
      }
      const results: FailoverResults = await runFailoverSuite({
        postgresUrl: postgres.url,
        cases,
        runs: failoverRuns,
        executors,
        log,
      });
      json.failover = results;
      const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
      const rows: Row[] = cases.map(({ label }) => {
        const list = results[label];
        const all = list.map((r) => r.allMs);
        return [
          `  ${label}`,
          seconds(median(all)),
          seconds(Math.max(...all)),
          seconds(median(list.map((r) => r.standbyServingMs))),
          seconds(median(list.flatMap((r) => r.perExecutorMs))),
        ];
      });
      print(table([
        "",
        `all ${executors} resumed, median`,
        "max",
        "standby serving, median",
        "per executor, median",
      ], rows));
      print(
        `   from the kill to each executor's first durable event acknowledged after it (by the standby), ${failoverRuns} run${
          failoverRuns > 1 ? "s" : ""
        } each; "standby serving": from the kill to its /readyz 200. ${
          twoHosts
            ? "Each harness under a host name of its own (unshare --uts): the standby waits for the lease (3 renewal intervals without a renewal), as on another machine; on one host it sees the holder's pid gone and takes over at its next poll."
            : "Both harnesses on this host (unshare --uts is not allowed here): the standby sees the holder's pid gone and takes over at its next poll, sooner than another machine would (after the lease)."
        }`,
      );
      const byDefault = results[cases[0].label].map((r) => r.allMs);
      check(
        "failover at the default lease: every executor resumed ≤ 20 s (15 s lease + one 5 s poll) after kill -9 (median)",
        [["s", median(byDefault) / 1000]],
        20,
        false,
      );
    } catch (error) {
      print(`   not measured: ${(error as Error).message.split("\n")[0]}`);
    }
  }
}

if (suites.has("reconnect")) {
  print();
  print(
    "9. Reconnect-to-resume (a Node harness and an ExecutorClient through a proxy that cuts both sockets, under load)",
  );
  const { reconnectReport, runReconnectSuite } = await import("./reconnect.ts");
  const options = { cuts: Number(flags.cuts ?? (quick ? 30 : 100)), events: 16, calls: 4, log };
  try {
    const results = await runReconnectSuite(options);
    json.reconnect = results;
    const scale = json.scale as ScaleResult[] | undefined;
    for (const line of reconnectReport(results, options, scale)) print(line);
  } catch (error) {
    print(`   not measured: ${(error as Error).message.split("\n")[0]}`);
  }
}

await postgres?.stop();

print();
print("Targets");
for (const t of report.targets) {
  const mark = t.holds === undefined ? "[ -- ]" : t.holds ? "[ ok ]" : "[MISS]";
  print(`  ${mark} ${t.what}: ${t.detail}`);
}
json.targets = report.targets;
if (flags.json) writeFileSync(flags.json, JSON.stringify(json, null, 2));
