/**
 * The edge benchmark's (edge.ts) executor processes: each runs many `ExecutorClient`s
 * (edge-executors.ts) and answers over common.ts's line protocol; their stats, summed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { LINE_PREFIX } from "./common.ts";
import { ROOT } from "./procs.ts";

// ---- executor processes ----------------------------------------------------------------------

export const BUNDLE = join(ROOT, "node_modules/.cache/bma-bench/edge-executors.mjs");

/** A process of `ExecutorClient`s (edge-executors.ts), driven over common.ts's line protocol. */
export class ExecutorProcess {
  readonly process: ChildProcess;
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  #seq = 0;
  readonly #waiting = new Map<number, (reply: Record<string, unknown>) => void>();
  #stderr = "";

  constructor(args: string[]) {
    this.process = spawn(process.execPath, [BUNDLE, ...args], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, NO_COLOR: "1" },
    });
    this.process.stderr!.on("data", (chunk) => {
      this.#stderr = (this.#stderr + chunk).slice(-4000);
    });
    this.exited = new Promise((resolve) => this.process.once("exit", () => resolve()));
    let ready!: () => void;
    let failed!: (error: Error) => void;
    this.ready = new Promise((resolve, reject) => {
      ready = resolve;
      failed = reject;
    });
    this.ready.catch(() => {});
    createInterface({ input: this.process.stdout! }).on("line", (line) => {
      if (!line.startsWith(LINE_PREFIX)) return;
      const message = JSON.parse(line.slice(LINE_PREFIX.length)) as Record<string, unknown>;
      if (message.ready) ready();
      else if (typeof message.seq === "number") {
        this.#waiting.get(message.seq)?.(message);
        this.#waiting.delete(message.seq);
      }
    });
    void this.exited.then(() => {
      const error = `edge executors exited${this.#stderr ? `:\n${this.#stderr}` : ""}`;
      failed(new Error(error));
      for (const waiter of this.#waiting.values()) waiter({ ok: false, error });
      this.#waiting.clear();
    });
  }

  async send(
    cmd: string,
    params: Record<string, unknown> = {},
    timeoutMs = 60_000,
  ): Promise<Record<string, unknown>> {
    const seq = ++this.#seq;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const reply = await new Promise<Record<string, unknown>>((resolve) => {
      this.#waiting.set(seq, resolve);
      timer = setTimeout(
        () => resolve({ ok: false, error: `${cmd}: no answer in ${timeoutMs} ms` }),
        timeoutMs,
      );
      this.process.stdin!.write(`${JSON.stringify({ cmd, seq, ...params })}\n`);
    }).finally(() => clearTimeout(timer));
    this.#waiting.delete(seq);
    if (!reply.ok) throw new Error(`edge executors: ${cmd} failed: ${reply.error}`);
    return reply;
  }

  kill(): void {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      this.process.kill("SIGKILL");
    }
  }
}

/** The children's stats, summed (their round trips merged as the worst child's percentiles). */
export async function gather(children: ExecutorProcess[], reset: boolean) {
  const all = await Promise.all(children.map((c) => c.send("stats", { reset })));
  const sum = (key: string) => all.reduce((s, a) => s + Number(a[key] ?? 0), 0);
  const worst = (key: string) => {
    const values = all.map((a) => a[key]).filter((v): v is number => typeof v === "number");
    return values.length ? Math.max(...values) : null;
  };
  const closes: Record<string, number> = {};
  for (const a of all) {
    for (const [code, n] of Object.entries(a.closes as Record<string, number>)) {
      closes[code] = (closes[code] ?? 0) + n;
    }
  }
  // The median of the children's medians: close enough for a few children of equal size.
  const medians = all.map((a) => a.rttP50Ms).filter((v): v is number => typeof v === "number")
    .sort((a, b) => a - b);
  return {
    answered: sum("answered"),
    sent: sum("sent"),
    late: sum("late"),
    timeouts: sum("timeouts"),
    refused: sum("refused"),
    failedStarts: sum("failedStarts"),
    connected: sum("connected"),
    closes,
    rttP50Ms: medians.length ? medians[medians.length >> 1] : null,
    rttP99Ms: worst("rttP99Ms"),
    rttMaxMs: worst("rttMaxMs"),
    loopMaxMs: worst("loopMaxMs"),
  };
}

export function percentile(sorted: number[], p: number): number | null {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

export function addCloses(into: Record<string, number>, from: Record<string, number>): void {
  for (const [code, count] of Object.entries(from)) into[code] = (into[code] ?? 0) + count;
}
