/**
 * Suites 1 and 2: tool-call round trips and durable session events, with their raw baselines,
 * on one runtime. Every process of every case is started first (pinned alike), then each
 * repetition measures every case in turn, so candidate and baseline share the same minutes of
 * the machine's noise.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Child, type Runtime } from "./procs.ts";

/** One measured figure: per-second rates, one per repetition. */
export type Rates = number[];

/** What one runtime's suite measured: case → mode → rates. */
export type CallResults = Record<string, Record<string, Rates>>;

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
}

interface Mode {
  key: string;
  inflight: number;
  params?: Record<string, unknown>;
}

interface CaseSpec {
  id: string;
  /** The process started first (server, or the only one). */
  first: string[];
  /** The second process, given the first's url (appended). */
  second?: string[];
  /** Which process drives: the first or the second. */
  driver: "first" | "second";
  modes: Mode[];
  /** Runs before each measurement (events: a fresh session). */
  before?: (first: Child, mode: Mode) => Promise<Record<string, unknown>>;
}

const PAIR: Mode[] = [{ key: "1", inflight: 1 }, { key: "64", inflight: 64 }];

function cases(runtime: Runtime, dir: string): CaseSpec[] {
  const sock = (name: string) => join(dir, `${runtime}-${name}.sock`);
  const list: CaseSpec[] = [
    {
      id: "ws-echo",
      first: ["ws-echo-server", "tcp"],
      second: ["ws-echo-client"],
      driver: "second",
      modes: PAIR,
    },
    {
      id: "tool-ws",
      first: ["tool-harness", "tcp"],
      second: ["tool-executor"],
      driver: "first",
      modes: PAIR,
    },
    {
      id: "unix-echo",
      first: ["ws-echo-server", sock("echo")],
      second: ["ws-echo-client"],
      driver: "second",
      modes: PAIR,
    },
    {
      id: "tool-unix",
      first: ["tool-harness", sock("tool")],
      second: ["tool-executor"],
      driver: "first",
      modes: PAIR,
    },
    {
      id: "ndjson-echo",
      first: ["ndjson-echo-server", sock("ndjson")],
      second: ["ndjson-echo-client"],
      driver: "second",
      modes: PAIR,
    },
    {
      id: "tool-memory",
      first: ["memory"],
      driver: "first",
      modes: [...PAIR, { key: "json", inflight: 1, params: { mode: "json" } }],
    },
    {
      id: "events",
      first: ["events-harness"],
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
    },
  ];
  if (runtime === "node") {
    list.push(
      { id: "mcp-memory", first: ["mcp-memory"], driver: "first", modes: PAIR },
      {
        id: "mcp-ws",
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
  const spawnOptions = (what: string) => ({ cpu: options.cpu, label: `${runtime} ${what}` });
  const start = async (args: string[]) => {
    const child = await Child.start(runtime, args, spawnOptions(args[0]));
    started.push(child); // stopped at the end whatever happens
    return child;
  };
  try {
    for (const spec of cases(runtime, dir)) {
      const first = await start(spec.first);
      const ready = await first.ready;
      let second: Child | undefined;
      if (spec.second) {
        second = await start([...spec.second, String(ready.url)]);
        await second.ready;
      }
      const driver = spec.driver === "first" ? first : second!;
      running.push({ spec, first, second, driver });
      results[spec.id] = {};
    }
    const measure = async (r: Running, mode: Mode, ms: number): Promise<number> => {
      const extra = r.spec.before ? await r.spec.before(r.first, mode) : {};
      const reply = await r.driver.send("run", {
        inflight: mode.inflight,
        ms,
        ...mode.params,
        ...extra,
      });
      return (Number(reply.count) / Number(reply.ms)) * 1000;
    };
    options.log(`${runtime}: warming up ${running.length} cases`);
    for (const r of running) {
      for (const mode of r.spec.modes) await measure(r, mode, options.warmupMs);
    }
    for (let run = 1; run <= options.runs; run++) {
      options.log(`${runtime}: run ${run} of ${options.runs}`);
      for (const r of running) {
        for (const mode of r.spec.modes) {
          const rate = await measure(r, mode, options.durationMs);
          (results[r.spec.id][mode.key] ??= []).push(rate);
        }
      }
    }
  } finally {
    await Promise.all(started.map((child) => child.stop()));
    rmSync(dir, { recursive: true, force: true });
  }
  return results;
}
