/**
 * Suite 9, reconnect-to-resume: a Node `Harness` served on 127.0.0.1 with its token endpoint,
 * one `ExecutorClient` holding a session and dialing the harness through a TCP proxy that can cut
 * (tests/helpers/chaos-proxy.ts: it destroys both sockets of every connection at once, without a
 * close handshake: a network failure, 1006 at both ends). Under load — the executor emitting
 * durable `session.event`s, `events` in flight all the time (`eventWindow` as wide, so all of
 * them are on the wire), and the harness calling a tool,
 * `calls` in flight — the proxy cuts the connection `cuts` times, each at a random point of the
 * traffic once it flows again. Per cut, measured from the cut: the executor registered again
 * with its session resumed (its state back to `connected`: the register result, with the
 * resumed session, has arrived), its first durable event acknowledged by the harness after that
 * (the resent, unacknowledged ones come first), and the harness's first tool result after it.
 *
 * Once with the client's default reconnect backoff (250 ms doubling to 30 s, jitter 0.5: the
 * first wait after a lost connection is 125–250 ms) and once with `reconnect: { initialDelayMs: 0 }`
 * (every wait 0 ms: 0 × 2ⁿ; it dials again at once, and would again at once after each failed
 * attempt, so a client for a real fleet keeps a backoff). A token fetch (HTTP, straight to the
 * harness, not through the proxy) precedes each dial, as it does in production.
 *
 * Both ends run in this process (tsx): one event loop carries the harness, the executor and the
 * proxy, so the figures include their contention, not a network's latency.
 */
import { Harness } from "../../harness/node.ts";
import { type BackoffPolicy, ExecutorClient } from "../../executor/node.ts";
import { silentLogger } from "../../protocol/logger.ts";
import { ChaosProxy } from "../../tests/helpers/chaos-proxy.ts";
import { sleep } from "./common.ts";
import { int, kb, type Row, table } from "./report.ts";
import type { ScaleResult } from "./scale.ts";

const SECRET = "bench-signing-secret-0123456789abcdef";
const ENVIRONMENT = { environmentId: "env_bench", environmentKey: "ek_bench_reconnect_key" };
const SESSION = "ses_reconnect";
const INFO = { name: "bench-reconnect", os: "linux", arch: "x64", version: "1.0.0" };

/** One reconnect setting. */
export interface ReconnectCase {
  label: string;
  /** The client's `reconnect` option; undefined: the default. */
  reconnect: BackoffPolicy | undefined;
}

/** The two settings the suite measures. */
export const RECONNECT_CASES: readonly ReconnectCase[] = [
  { label: "default backoff (250 ms × 2ⁿ, jitter 0.5)", reconnect: undefined },
  { label: "reconnect: { initialDelayMs: 0 }", reconnect: { initialDelayMs: 0 } },
];

/** How the suite runs. */
export interface ReconnectOptions {
  cuts: number;
  /** Durable events in flight. */
  events: number;
  /** Tool calls in flight. */
  calls: number;
  log: (line: string) => void;
}

/** What one case measured, ms from each cut. */
export interface ReconnectRun {
  /** To the executor registered again, its session resumed. */
  resumedMs: number[];
  /** To its first durable event acknowledged after that. */
  eventMs: number[];
  /** To the harness's first tool result after that. */
  resultMs: number[];
  /** Connections the proxy accepted (one per reconnect, plus the first). */
  connections: number;
  /** Events acknowledged and tool results received over the whole case. */
  events: number;
  results: number;
  /** Calls or events that failed (none expected: both are delivered across reconnects). */
  failures: number;
}

export type ReconnectResults = Record<string, ReconnectRun>;

/** The measurement of the cut in progress. */
interface Cut {
  at: number;
  resumed?: number;
  event?: number;
  result?: number;
}

async function until(what: string, test: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) throw new Error(`reconnect suite: timed out: ${what}`);
    await sleep(2);
  }
}

async function runCase(options: ReconnectOptions, setting: ReconnectCase): Promise<ReconnectRun> {
  const harness = new Harness({
    logger: silentLogger,
    tokens: { secret: SECRET, credentials: [ENVIRONMENT] },
  });
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  const proxy = await ChaosProxy.start(server.url);
  const client = new ExecutorClient({
    baseUrl: server.httpUrl,
    harnessUrl: proxy.url,
    ...ENVIRONMENT,
    executor: INFO,
    logger: silentLogger,
    // All of them on the wire, not queued behind one: what is unacknowledged at the cut is resent.
    eventWindow: options.events,
    ...(setting.reconnect ? { reconnect: setting.reconnect } : {}),
  });
  client.tools.bash.handle(() => ({ stdout: "ok", stderr: "", exit_code: 0 }));
  const run: ReconnectRun = {
    resumedMs: [],
    eventMs: [],
    resultMs: [],
    connections: 0,
    events: 0,
    results: 0,
    failures: 0,
  };
  let cut: Cut | undefined;
  /** Events acknowledged since the executor last registered. */
  let flowing = 0;
  let running = true;
  const loops: Promise<void>[] = [];
  try {
    client.onStateChange((state) => {
      if (state !== "connected") return;
      flowing = 0;
      if (cut && cut.resumed === undefined) cut.resumed = performance.now();
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: SESSION });
    await session.ready();

    for (let i = 0; i < options.events; i++) {
      loops.push((async () => {
        for (let n = 0; running; n++) {
          try {
            await client.call("session.event", {
              session_id: SESSION,
              event: { type: "tick", worker: i, n },
            });
          } catch {
            if (running) run.failures++;
            continue;
          }
          run.events++;
          flowing++;
          // An acknowledgement read after the register result came over the new connection.
          if (cut?.resumed !== undefined && cut.event === undefined) cut.event = performance.now();
        }
      })());
    }
    for (let i = 0; i < options.calls; i++) {
      loops.push((async () => {
        while (running) {
          try {
            await session.tools.bash.call({ command: "true" });
          } catch {
            if (running) run.failures++;
            continue;
          }
          run.results++;
          if (cut?.resumed !== undefined && cut.result === undefined) {
            cut.result = performance.now();
          }
        }
      })());
    }

    for (let k = 0; k < options.cuts; k++) {
      // Traffic flows on the current connection, then the cut lands at a random point of it.
      await until("events flowing", () => flowing >= options.events * 2);
      await sleep(Math.random() * 20);
      cut = { at: performance.now() };
      proxy.cut();
      const current = cut;
      await until(
        `cut ${k + 1} resumed`,
        () => current.event !== undefined && (options.calls === 0 || current.result !== undefined),
      );
      run.resumedMs.push(current.resumed! - current.at);
      run.eventMs.push(current.event! - current.at);
      if (current.result !== undefined) run.resultMs.push(current.result - current.at);
      if ((k + 1) % 25 === 0) options.log(`reconnect, ${setting.label}: ${k + 1} cuts`);
    }
    if (executor.gone || client.executorId !== executor.id) {
      throw new Error("reconnect suite: the executor did not resume its registration");
    }
    run.connections = proxy.accepted;
    return run;
  } finally {
    running = false;
    await client.stop().catch(() => {});
    await proxy.close();
    // Closing the harness settles what is still pending at its end too.
    await server.close();
    await Promise.all(loops);
  }
}

/** Runs suite 9: each case in turn. */
export async function runReconnectSuite(options: ReconnectOptions): Promise<ReconnectResults> {
  const results: ReconnectResults = {};
  for (const setting of RECONNECT_CASES) {
    options.log(`reconnect, ${setting.label}: ${options.cuts} cuts`);
    results[setting.label] = await runCase(options, setting);
  }
  return results;
}

/** The value at quantile `q` (nearest rank). */
export function percentile(values: number[], q: number): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * The suite's printed lines: per case, p50 / p99 / max of each figure, and beside them the
 * harness's memory per connected executor at 10,000 from suite 3 of this run, when it ran.
 */
export function reconnectReport(
  results: ReconnectResults,
  options: ReconnectOptions,
  scale: ScaleResult[] | undefined,
): string[] {
  const ms = (v: number) => `${v.toFixed(v < 10 ? 1 : 0)} ms`;
  const spread = (values: number[]) =>
    values.length
      ? `${ms(percentile(values, 0.5))} / ${ms(percentile(values, 0.99))} / ${
        ms(Math.max(...values))
      }`
      : "–";
  const rows: Row[] = [];
  for (const setting of RECONNECT_CASES) {
    const r = results[setting.label];
    if (!r) continue;
    rows.push([
      `  ${setting.label}`,
      spread(r.resumedMs),
      spread(r.eventMs),
      spread(r.resultMs),
    ]);
  }
  // 10,000 executors, or the most this run's suite 3 held (`--sizes`).
  const big = scale?.find((s) => s.n === 10_000) ??
    scale?.reduce((a, b) => (b.n > a.n ? b : a), scale[0]);
  rows.push([
    `  harness memory per connected executor, ${big ? int(big.n) : "10,000"} executors (suite 3)`,
    big ? `heap ${kb(big.heapPerExecutor)}, RSS ${kb(big.rssPerExecutor)}` : "–",
    "",
    "",
  ]);
  const first = results[RECONNECT_CASES[0].label];
  return [
    table(
      [
        "from the cut, p50 / p99 / max",
        "executor resumed",
        "first event acknowledged",
        "first tool result",
      ],
      rows,
    ),
    `   ${
      int(options.cuts)
    } cuts per setting (the proxy destroys both sockets), under ${options.events} durable events and ${options.calls} tool calls in flight; harness, executor and proxy in one Node process (tsx)${
      first
        ? `; default backoff: ${int(first.events)} events and ${
          int(first.results)
        } tool results over ${first.connections} connections, ${first.failures} failed`
        : ""
    }.`,
    big
      ? `   Memory: suite 3 of this run, the harness's heap and RSS growth from idle to ${
        int(big.n)
      } executors connected, after a full GC, per executor.`
      : "   Memory: suite 3 did not run (`--only scale,reconnect`, with 10,000 in `--sizes`, puts it here); docs/benchmarks.md has the last published figure.",
  ];
}
