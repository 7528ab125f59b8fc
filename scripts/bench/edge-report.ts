/** The edge benchmark's (edge.ts) result as text tables. */
import { DEFAULT_INTERVAL_MS, type EdgeResult } from "./edge.ts";

// ---- the tables ------------------------------------------------------------------------------

type Row = [string, ...string[]];

function table(header: Row, rows: Row[]): string {
  const widths = header.map((_, i) =>
    Math.max(...[header, ...rows].map((r) => (r[i] ?? "").length))
  );
  const line = (r: Row) =>
    r.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i])))
      .join("   ").trimEnd();
  return [line(header), ...rows.map(line)].join("\n");
}

const mib = (bytes: number | undefined) =>
  bytes === undefined ? "–" : `${(bytes / 2 ** 20).toFixed(1)} MiB`;
const kib = (bytes: number | undefined) =>
  bytes === undefined ? "–" : `${(bytes / 1024).toFixed(1)} KiB`;
const ms = (value: number | null) =>
  value === null ? "–" : value < 10 ? value.toFixed(2) : value.toFixed(0);
const int = (value: number) => Math.round(value).toLocaleString("en-US");

/** The suite's lines for the bench's output. */
export function edgeReport(result: EdgeResult): string[] {
  const interval = result.intervalMs;
  const lines: string[] = [];
  lines.push(
    `   executors: ${result.executors}; heartbeat interval ${interval} ms (BMA_HEARTBEAT_INTERVAL_MS; lease and register deadline twice that); CPU window ${result.windowIntervals} intervals; workerd: 1 process, ${result.threads} threads`,
  );
  lines.push(
    `   workerd RSS ${mib(result.rssRuntime)} with the Worker loaded, ${
      mib(result.rssEmpty)
    } with the empty object (its isolate's JS heap ${mib(result.heapEmpty)}); idle CPU ${
      result.idleCpuMsPerSecond.toFixed(2)
    } ms/s`,
  );
  lines.push("");
  lines.push(table(
    [
      "  executors",
      "register",
      "µs CPU each",
      "workerd RSS",
      "RSS/exec (step)",
      "RSS/exec (all)",
      "JS heap",
      "heap/exec (step)",
      "heap/exec (all)",
    ],
    result.steps.map((s) => [
      `  ${int(s.n)}`,
      `${(s.registerMs / 1000).toFixed(1)} s`,
      int(s.cpuPerRegisterUs),
      mib(s.rss),
      kib(s.rssPerExecutorStep),
      kib(s.rssPerExecutorTotal),
      mib(s.heap),
      kib(s.heapPerExecutorStep),
      kib(s.heapPerExecutorTotal),
    ]),
  ));
  lines.push("");
  lines.push(table(
    [
      "  executors",
      "CPU/interval",
      "µs/heartbeat",
      "bare object",
      "× bare",
      "busiest thread",
      "at 15 s",
      "heartbeat p50/p99/max ms",
      "call p50/p99 ms",
      "calls/s",
      "executors' / other CPU",
      "keeps up",
    ],
    result.steps.map((s) => [
      `  ${int(s.n)}`,
      `${(s.cpuMs * interval / s.windowMs).toFixed(1)} ms`,
      s.cpuPerHeartbeatUs.toFixed(0),
      !s.echo
        ? "–"
        : s.echo.kept
        ? `${s.echo.usPerMessage.toFixed(0)} (${(s.echo.busiestThread * 100).toFixed(0)}%)`
        : "behind",
      s.echo?.kept && s.echo.usPerMessage
        ? `${(s.cpuPerHeartbeatUs / s.echo.usPerMessage).toFixed(2)}×`
        : "–",
      `${(s.busiestThread * 100).toFixed(1)}%`,
      `${(s.n * s.cpuPerHeartbeatUs / 1e3 / DEFAULT_INTERVAL_MS * 100).toFixed(2)}%`,
      `${ms(s.rttP50Ms)} / ${ms(s.rttP99Ms)} / ${ms(s.rttMaxMs)}`,
      `${ms(s.callP50Ms)} / ${ms(s.callP99Ms)}`,
      s.callsPerSecond.toFixed(0),
      `${s.executorsCores.toFixed(2)} / ${s.otherCores.toFixed(2)} cores`,
      s.behind ? "no (below)" : "yes",
    ]),
  ));
  lines.push(
    `   register: wall time for the step's new executors (token exchange, upgrade, executor.register), and workerd's CPU per executor meanwhile (less the idle object's and the held executors' heartbeats', at the step before's rate). RSS: the whole workerd process (runtime, Miniflare's own workers, sockets); JS heap: the Worker's isolate, where the object lives, after a full GC (inspector); both once every executor heartbeated twice.`,
  );
  lines.push(
    `   CPU/interval: workerd's CPU time (all threads) per heartbeat interval with heartbeats only; µs/heartbeat: that less the idle object's, per heartbeat answered; bare object: the baseline, workerd's CPU per message of an object that only answers as many sockets at the same interval with a frame of a heartbeat's answer (scripts/bench/edge-echo.ts; its busiest thread's share in brackets; behind: it answered fewer than 9 in 10 of the messages due), and the heartbeat against it; busiest thread: its share of the window (the object runs on one thread); at 15 s: N executors at the default 15 s interval as a share of one core (µs/heartbeat × N / 15 s). Heartbeat: round trip seen by the executor. Calls: one in flight over the brain API (HTTP → Worker → object → executor → object → HTTP), round robin over a few sessions, heartbeats going on. Executors' / other CPU: the executor processes', and the rest of the machine's, during the CPU window.`,
  );
  for (const s of result.steps) {
    const closed = Object.entries(s.closes).map(([code, count]) => `${count}× ${code}`).join(", ");
    if (s.behind) {
      lines.push(`   ${int(s.n)}: behind: ${s.behind}${closed ? `; closes ${closed}` : ""}`);
    }
  }
  if (result.skipped.length) {
    lines.push(
      `   left out: ${result.skipped.join(", ")} (workerd's open-file limit ${result.fileLimit})`,
    );
  }
  const kept = result.steps.filter((s) => !s.behind);
  const last = kept.at(-1);
  if (last && last.cpuPerHeartbeatUs > 0) {
    const full = DEFAULT_INTERVAL_MS * 1000 / last.cpuPerHeartbeatUs;
    lines.push(
      `   largest step kept up: ${int(last.n)} executors (${
        int(last.n * 1000 / interval)
      } heartbeats/s, busiest thread ${(last.busiestThread * 100).toFixed(0)}%); at ${
        last.cpuPerHeartbeatUs.toFixed(0)
      } µs per heartbeat, heartbeats alone would fill one thread at about ${
        int(full)
      } executors at the 15 s interval; per executor about ${
        kib(last.heapPerExecutorTotal)
      } of JS heap and ${kib(last.rssPerExecutorTotal)} of RSS`,
    );
  }
  lines.push(`   ${result.stopped ? `stopped: ${result.stopped}` : "kept up at every step"}`);
  return lines;
}
