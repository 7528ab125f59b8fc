/**
 * What the benchmark's processes share: the runtime they run on, the line protocol between the
 * orchestrator (`main.ts`) and its children (`child.ts`), the load loops, and the frame every
 * case sends, so the raw echo carries a frame of exactly the size of a tool call's.
 */
import { createInterface } from "node:readline";

/** The runtime this process runs on. */
export const RUNTIME: "node" | "deno" | "bun" = "Deno" in globalThis
  ? "deno"
  : "Bun" in globalThis
  ? "bun"
  : "node";

/** The subprotocol every case negotiates. */
export const PROTOCOL = "bma.executor.v1.1";

/** The tool every case calls, and its input: small, like a real call's. */
export const TOOL = "echo";
/** The `text` input of each call. */
export const INPUT_TEXT = "print the working directory and list it: pwd && ls -la";
/** The session every tool-call case runs in. */
export const SESSION_ID = "ses_bench";

/**
 * The `tool.call` frame the harness sends for one call (the id and tool_call_id are as long as
 * the real ones): the raw echo sends a frame of this size.
 */
export function toolCallFrame(): string {
  return JSON.stringify({
    jsonrpc: "2.0",
    id: 100_000,
    method: "tool.call",
    params: {
      session_id: SESSION_ID,
      tool_call_id: `call_${"0".repeat(24)}`,
      tool: TOOL,
      input: { text: INPUT_TEXT },
    },
  });
}

/** What a measurement answers. */
export interface Measured {
  /** Operations completed. */
  count: number;
  /** Over how many ms. */
  ms: number;
  /** CPU time this process used meanwhile (user + system), µs: a cross-check under load. */
  cpuUs?: number;
  /**
   * Each operation's latency over the run, from just before it started to just after its
   * completion reached the loop, µs: the median, the 99th and the 99.9th percentile (nearest
   * rank). Absent where operations are not timed one by one (the JSON reference figure).
   */
  p50Us?: number;
  p99Us?: number;
  p999Us?: number;
}

/**
 * The latencies of the current run, ms, one per operation. Every load loop records the same
 * way: one `performance.now()` per completed operation (the one that checks the deadline,
 * which every loop made before latencies were recorded) and one store into this array. The
 * array is kept across runs and grows by doubling, so once the warm-up has grown it a measured
 * run allocates nothing; it is sorted once, after the run's time is taken.
 */
let samples = new Float64Array(1 << 16);
let recorded = 0;

/** Starts recording a run's latencies (forgets the last run's). */
export function startLatencies(): void {
  recorded = 0;
}

/** Records one operation's latency, ms. */
export function recordLatency(ms: number): void {
  if (recorded === samples.length) {
    const grown = new Float64Array(samples.length * 2);
    grown.set(samples);
    samples = grown;
  }
  samples[recorded++] = ms;
}

/** The percentiles of the latencies recorded since {@linkcode startLatencies}, µs. */
export function latencyPercentiles(): Pick<Measured, "p50Us" | "p99Us" | "p999Us"> {
  const n = recorded;
  if (n === 0) return {};
  const sorted = samples.subarray(0, n).sort();
  const at = (p: number) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(p * n) - 1))] * 1000;
  return { p50Us: at(0.5), p99Us: at(0.99), p999Us: at(0.999) };
}

/**
 * Runs `op` with `inflight` operations outstanding at any time for `ms` milliseconds (each
 * lane starts the next operation when its previous one has finished), counts completions and
 * records each one's latency (the lane's clock reading after one operation is the start of its
 * next: one reading per operation).
 */
export async function measureLoop(
  op: () => Promise<unknown>,
  inflight: number,
  ms: number,
): Promise<Measured> {
  let count = 0;
  startLatencies();
  const cpu = process.cpuUsage();
  const started = performance.now();
  const end = started + ms;
  let stop = false;
  const lane = async () => {
    let at = performance.now();
    while (!stop) {
      await op();
      const now = performance.now();
      recordLatency(now - at);
      at = now;
      count++;
      if (now >= end) stop = true;
    }
  };
  await Promise.all(Array.from({ length: inflight }, lane));
  const used = process.cpuUsage(cpu);
  const elapsed = performance.now() - started;
  return { count, ms: elapsed, cpuUs: used.user + used.system, ...latencyPercentiles() };
}

/** A command from the orchestrator. */
export interface Command {
  cmd: string;
  [key: string]: unknown;
}

/** Prefix of the lines a child writes for the orchestrator (anything else is a log line). */
export const LINE_PREFIX = "@bench ";

/** Tells the orchestrator something (one JSON line on stdout). */
export function report(message: Record<string, unknown>): void {
  process.stdout.write(`${LINE_PREFIX}${JSON.stringify(message)}\n`);
}

/**
 * Serves the orchestrator's commands, one at a time, in order: each answer is reported with the
 * command's `seq`. Resolves when stdin closes or the command `exit` arrives.
 */
export function serveCommands(
  handle: (command: Command) => Promise<Record<string, unknown>>,
): Promise<void> {
  return new Promise((resolve) => {
    const lines = createInterface({ input: process.stdin });
    let chain = Promise.resolve();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      lines.close();
      resolve();
    };
    lines.on("line", (line) => {
      if (!line.trim()) return;
      const command = JSON.parse(line) as Command;
      chain = chain.then(async () => {
        if (done) return;
        if (command.cmd === "exit") {
          report({ seq: command.seq, ok: true });
          finish();
          return;
        }
        try {
          report({ seq: command.seq, ok: true, ...(await handle(command)) });
        } catch (error) {
          report({ seq: command.seq, ok: false, error: String((error as Error)?.stack ?? error) });
        }
      });
    });
    lines.on("close", () => void chain.then(finish));
  });
}

/** Resolves after `ms`. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
