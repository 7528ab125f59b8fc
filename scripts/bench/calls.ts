/**
 * Suites 1 and 2: tool-call round trips and durable session events, with their raw baselines,
 * on one runtime. Every process of every case is started first (pinned alike). Then, group by
 * group (the cases compared with each other: the WebSocket echo, tool call and MCP call; the
 * Unix-socket ones; the in-memory ones; events) and mode by mode, the group's cases take turns:
 * warm-up, then `runs` measurements each, so a candidate and its baseline share the same minutes
 * of the machine's noise (its speed drifts by a third over minutes) while no process idles
 * longer than the others' turns. Turns across all cases, as before, left each process idle for
 * the others' turns took, and the run after such a gap was slower by an amount that varied from
 * run to run (docs/benchmarks.md has the figures); after a gap as long as one warm-up it was not.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Child, type Runtime, type SpawnOptions } from "./procs.ts";

/** One measured figure: per-second rates (or latencies, µs), one per repetition. */
export type Rates = number[];

/**
 * What one runtime's suite measured: case → mode → rates; beside each timed mode's rates, its
 * latency percentiles per run under `<mode>:p50`, `<mode>:p99` and `<mode>:p99.9` (µs; see
 * {@linkcode PERCENTILES}).
 */
export type CallResults = Record<string, Record<string, Rates>>;

/** The latency percentiles a run reports: the results' key suffix, and the reply's field. */
export const PERCENTILES: readonly (readonly [string, "p50Us" | "p99Us" | "p999Us"])[] = [
  ["p50", "p50Us"],
  ["p99", "p99Us"],
  ["p99.9", "p999Us"],
];

/** How the suite runs. */
export interface CallSuiteOptions {
  /** Milliseconds per measurement. */
  durationMs: number;
  /** Repetitions (the median is reported). */
  runs: number;
  /** Warm-up per case and mode, ms. */
  warmupMs: number;
  /** CPU both processes of a case are pinned to; undefined: unpinned. */
  cpu: number | undefined;
  /** Progress lines. */
  log: (line: string) => void;
  /**
   * Another checkout (its root directory) whose SDK cases run as twins (`<case>@base`) in the
   * same groups, taking turns with this checkout's: before/after figures from one run.
   */
  compare?: string;
  /** Only these cases (ids, e.g. `tool-ws`; their `--compare` twins follow them). */
  cases?: readonly string[];
  /**
   * A PostgreSQL database (the bench's own server, see main.ts): adds `events-postgres`, the
   * durable events with the harness's state in a table there.
   */
  postgresUrl?: string;
}

/** The cases of the SDK (not the raw baselines): twinned by `--compare`. */
export const SDK_CASES: readonly string[] = [
  "tool-ws",
  "tool-unix",
  "tool-memory",
  "events",
  "events-sqlite",
];

/** How many durable events the heap figure fills a session with, and the longer run after. */
export const HEAP_EVENTS = 10_000;
export const HEAP_EVENTS_LONG = 50_000;

interface Mode {
  key: string;
  inflight: number;
  params?: Record<string, unknown>;
}

interface CaseSpec {
  id: string;
  /** Cases compared with each other, measured in turn (see the module's comment). */
  group: "ws" | "unix" | "memory" | "events";
  /** The process started first (server, or the only one). */
  first: string[];
  /** The second process, given the first's url (appended). */
  second?: string[];
  /** Which process drives: the first or the second. */
  driver: "first" | "second";
  modes: Mode[];
  /** Runs before each measurement (events: a fresh session). */
  before?: (first: Child, mode: Mode) => Promise<Record<string, unknown>>;
  /** The checkout it runs from (a `--compare` twin); default this one. */
  root?: string;
  /** Runtime flags of the first process. */
  firstFlags?: string[];
}

const PAIR: Mode[] = [{ key: "1", inflight: 1 }, { key: "64", inflight: 64 }];

/** Runtime flags that let a process collect garbage on demand (Bun always can). */
const GC_FLAGS: Record<Runtime, string[]> = {
  node: ["--expose-gc"],
  deno: ["--v8-flags=--expose-gc"],
  bun: [],
};

function cases(runtime: Runtime, dir: string, postgresUrl: string | undefined): CaseSpec[] {
  const sock = (name: string) => join(dir, `${runtime}-${name}.sock`);
  // What the durable-event cases share: the executor drives, each run in a fresh session.
  const events: Omit<CaseSpec, "id" | "first"> = {
    group: "events",
    second: ["events-executor"],
    driver: "second",
    modes: [
      { key: "1", inflight: 1, params: { client: "events-w1" } },
      { key: "64", inflight: 64, params: { client: "events-w64" } },
    ],
    before: async (first, mode) => {
      const { sessions } = await first.send("fresh", { executors: 2 });
      return { session: (sessions as Record<string, string>)[String(mode.params!.client)] };
    },
  };
  const list: CaseSpec[] = [
    {
      id: "ws-echo",
      group: "ws",
      first: ["ws-echo-server", "tcp"],
      second: ["ws-echo-client"],
      driver: "second",
      modes: PAIR,
    },
    {
      id: "tool-ws",
      group: "ws",
      first: ["tool-harness", "tcp"],
      second: ["tool-executor"],
      driver: "first",
      modes: PAIR,
    },
    {
      id: "unix-echo",
      group: "unix",
      first: ["ws-echo-server", sock("echo")],
      second: ["ws-echo-client"],
      driver: "second",
      modes: PAIR,
    },
    {
      id: "tool-unix",
      group: "unix",
      first: ["tool-harness", sock("tool")],
      second: ["tool-executor"],
      driver: "first",
      modes: PAIR,
    },
    {
      id: "ndjson-echo",
      group: "unix",
      first: ["ndjson-echo-server", sock("ndjson")],
      second: ["ndjson-echo-client"],
      driver: "second",
      modes: PAIR,
    },
    {
      id: "tool-memory",
      group: "memory",
      first: ["memory"],
      driver: "first",
      modes: [...PAIR, { key: "json", inflight: 1, params: { mode: "json" } }],
    },
    {
      ...events,
      id: "events",
      first: ["events-harness"],
      firstFlags: GC_FLAGS[runtime],
    },
    {
      // The same, with the harness's state in a SQLite file (the runtime's default driver):
      // every accepted event is written before its ACK (synchronous NORMAL, the default).
      ...events,
      id: "events-sqlite",
      first: ["events-harness", join(dir, `${runtime}-events.db`), "normal"],
    },
    {
      // And with synchronous FULL: every commit fsynced before its ACK.
      ...events,
      id: "events-sqlite-full",
      first: ["events-harness", join(dir, `${runtime}-events-full.db`), "full"],
    },
  ];
  if (postgresUrl) {
    // And with the PostgreSQL store: every accepted event committed in the database before its
    // ACK (a table per runtime, so each harness holds its own claim).
    list.push({
      ...events,
      id: "events-postgres",
      first: ["events-harness", postgresUrl, `bench_events_${runtime}`],
    });
  }
  if (runtime === "node") {
    list.push(
      { id: "mcp-memory", group: "memory", first: ["mcp-memory"], driver: "first", modes: PAIR },
      {
        id: "mcp-ws",
        group: "ws",
        first: ["mcp-ws-server"],
        second: ["mcp-ws-client"],
        driver: "second",
        modes: PAIR,
      },
    );
  }
  return list;
}

interface Running {
  spec: CaseSpec;
  first: Child;
  second: Child | undefined;
  driver: Child;
}

/** Runs suites 1 and 2 on one runtime. */
export async function runCallSuite(
  runtime: Runtime,
  options: CallSuiteOptions,
): Promise<CallResults> {
  const dir = mkdtempSync(join(tmpdir(), "bma-bench-"));
  const running: Running[] = [];
  const started: Child[] = [];
  const results: CallResults = {};
  const start = async (args: string[], spec: CaseSpec, flags?: string[]) => {
    const spawnOptions: SpawnOptions = {
      cpu: options.cpu,
      label: `${runtime} ${args[0]}${spec.root ? " (--compare)" : ""}`,
      ...(spec.root ? { root: spec.root } : {}),
      ...(flags?.length ? { runtimeFlags: flags } : {}),
    };
    const child = await Child.start(runtime, args, spawnOptions);
    started.push(child); // stopped at the end whatever happens
    return child;
  };
  let specs = cases(runtime, dir, options.postgresUrl);
  if (options.cases) specs = specs.filter((s) => options.cases!.includes(s.id));
  if (options.compare) {
    // The twins share their group with the cases they are compared with, so the turns
    // interleave them; Unix socket paths and SQLite files get their own names.
    const twins = specs.filter((s) => SDK_CASES.includes(s.id)).map((s): CaseSpec => ({
      ...s,
      id: `${s.id}@base`,
      root: options.compare,
      first: s.first.map((arg) => arg.replace(/\.(sock|db)$/, "-base.$1")),
      firstFlags: undefined,
    }));
    specs = specs.flatMap((s) => [s, ...twins.filter((t) => t.id === `${s.id}@base`)]);
  }
  try {
    for (const spec of specs) {
      const first = await start(spec.first, spec, spec.firstFlags);
      const ready = await first.ready;
      let second: Child | undefined;
      if (spec.second) {
        second = await start([...spec.second, String(ready.url)], spec);
        await second.ready;
      }
      const driver = spec.driver === "first" ? first : second!;
      running.push({ spec, first, second, driver });
      results[spec.id] = {};
    }
    const measure = async (r: Running, mode: Mode, ms: number) => {
      const extra = r.spec.before ? await r.spec.before(r.first, mode) : {};
      return await r.driver.send("run", {
        inflight: mode.inflight,
        ms,
        ...mode.params,
        ...extra,
      });
    };
    const groups = [...new Set(running.map((r) => r.spec.group))];
    for (const group of groups) {
      const members = running.filter((r) => r.spec.group === group);
      const keys = [...new Set(members.flatMap((r) => r.spec.modes.map((m) => m.key)))];
      for (const key of keys) {
        const turns = members.flatMap((r) => {
          const mode = r.spec.modes.find((m) => m.key === key);
          return mode ? [{ r, mode }] : [];
        });
        options.log(`${runtime}: ${turns.map((t) => t.r.spec.id).join(", ")}; mode ${key}`);
        // The warm-up in two turns each, so the first measured run follows a short gap too.
        for (let half = 0; half < 2; half++) {
          for (const { r, mode } of turns) await measure(r, mode, options.warmupMs / 2);
        }
        for (let run = 1; run <= options.runs; run++) {
          for (const { r, mode } of turns) {
            const reply = await measure(r, mode, options.durationMs);
            const figures = results[r.spec.id];
            (figures[mode.key] ??= []).push((Number(reply.count) / Number(reply.ms)) * 1000);
            // Its latency percentiles, where the loop timed each operation (a `--compare`
            // checkout from before they were recorded reports none).
            for (const [name, field] of PERCENTILES) {
              const us = reply[field];
              if (typeof us === "number") (figures[`${mode.key}:${name}`] ??= []).push(us);
            }
          }
        }
      }
    }
    const events = running.find((r) => r.spec.id === "events");
    if (events) {
      options.log(`${runtime}: harness heap per retained durable event`);
      results["event-heap"] = await measureEventHeap(events.first, events.second!);
    }
  } finally {
    await Promise.all(started.map((child) => child.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

/**
 * The harness's heap per durable event it keeps: a fresh session, then {@linkcode HEAP_EVENTS}
 * events (64 in flight), heap used after a full collection before and after; then
 * {@linkcode HEAP_EVENTS_LONG} in all, where the log keeps its bound (10,000 by default).
 */
async function measureEventHeap(harness: Child, executor: Child): Promise<Record<string, Rates>> {
  const { sessions } = await harness.send("fresh", { executors: 2 });
  const session = (sessions as Record<string, string>)["events-w64"];
  const heap = async () => Number((await harness.send("heap")).heapUsed);
  const fill = (count: number) => executor.send("fill", { client: "events-w64", session, count });
  const before = await heap();
  await fill(HEAP_EVENTS);
  const filled = await heap();
  await fill(HEAP_EVENTS_LONG - HEAP_EVENTS);
  const long = await heap();
  const kept = await harness.send("kept", { session });
  return {
    perEvent: [(filled - before) / HEAP_EVENTS],
    longGrowth: [long - before],
    keptLong: [Number(kept.kept)],
  };
}
