/**
 * Suite 7: how many executors one edge harness object holds. The project's Workers bundle
 * (scripts/bench/workers-bundle.ts: examples/workers/worker.ts, minified) runs in the real
 * workerd through Miniflare, offline on 127.0.0.1, with one environment whose executors all
 * go to one `HarnessObject` (`environments/<id>`). Real `ExecutorClient`s in a few Node
 * processes (scripts/bench/edge-executors.ts) exchange the environment credential at the
 * Worker's token endpoint, connect, register and heartbeat at a short interval; step by step
 * more of them join. At each step, once every executor has heartbeated twice:
 *
 * - memory: workerd's RSS (/proc/<pid>/status) and the JS heap of the Worker's isolate (where
 *   the object lives; `Runtime.getHeapUsage` over workerd's inspector after
 *   `HeapProfiler.collectGarbage`), against the step before and against the empty object;
 * - CPU: workerd's CPU time (every thread's, /proc/<pid>/task/<tid>/schedstat, ns) over a window
 *   of whole heartbeat intervals with nothing but heartbeats, less the idle object's, divided
 *   by the heartbeats answered meanwhile: µs per heartbeat; the busiest thread's share of the
 *   window (the object runs on one thread); and what the rest of the machine used meanwhile
 *   (/proc/stat), since a loaded machine slows everything measured here;
 * - the heartbeats' round trips as the executors see them (`executor.heartbeat` out to its
 *   answer in), late ones (over one interval), timeouts, leases expired (4005);
 * - tool calls made by a brain outside over the brain API (`POST /v1/harness/environments/<id>/
 *   sessions/<sid>/tool-calls?wait_ms=...`, one in flight, round robin over a few sessions on
 *   different executors) while the heartbeats go on: p50 / p99.
 *
 * It stops growing at the first step where the object no longer keeps up (an executor not
 * registered in time, a heartbeat timed out, a lease expired, a call failed, over 1% of
 * heartbeats late) or when the time budget is spent. workerd and every child are killed at the
 * end, on error and on SIGINT/SIGTERM too.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare, NoOpLog } from "miniflare";
import WebSocket from "ws";
import { INPUT_TEXT, LINE_PREFIX, sleep } from "./common.ts";
import { ROOT } from "./procs.ts";
import { buildWorkersBundle } from "./workers-bundle.ts";

/** Credentials of the benchmark's Worker (made up, local only). */
const EDGE = {
  jwtSecret: "edge-bench-signing-secret-0123456789abcdef",
  brainToken: "brain_bench_token_7c1e9a42",
  environmentId: "env_bench",
  environmentKey: "ek_bench_key_41d0c8e7a9",
} as const;

/** The Worker's name in Miniflare: its isolate is the inspector target `core:user:<name>`. */
const WORKER_NAME = "bench";

/** The heartbeat interval the defaults of Workers and Node hand out, ms. */
export const DEFAULT_INTERVAL_MS = 15_000;

/** How the suite runs. */
export interface EdgeOptions {
  /** Executors held at each step, ascending. */
  sizes: number[];
  /** The heartbeat interval the object hands out (`BMA_HEARTBEAT_INTERVAL_MS`), ms. */
  intervalMs: number;
  /** The CPU window, in heartbeat intervals. */
  windowIntervals: number;
  /** How long tool calls are made at each step, ms. */
  callMs: number;
  /** Executor processes. */
  processes: number;
  /** Registrations in flight per executor process. */
  concurrency: number;
  /** Stop adding steps once this much time has passed, ms. */
  budgetMs: number;
  log: (line: string) => void;
}

/** One step: `n` executors held. */
export interface EdgeStep {
  n: number;
  /** Time to register the executors this step added, ms. */
  registerMs: number;
  /**
   * workerd CPU per executor this step added, while they registered (token exchange, upgrade,
   * register), less the idle object's and the held executors' heartbeats' (the step before's
   * rate), µs.
   */
  cpuPerRegisterUs: number;
  /** Executors connected, as the brain API lists them. */
  connected: number;
  /** workerd RSS, bytes. */
  rss: number;
  /** RSS growth per executor against the step before, and against the empty object, bytes. */
  rssPerExecutorStep: number;
  rssPerExecutorTotal: number;
  /** JS heap used by the Worker's isolate after a full GC, bytes (undefined: not read). */
  heap: number | undefined;
  heapPerExecutorStep: number | undefined;
  heapPerExecutorTotal: number | undefined;
  /** The CPU window, ms. */
  windowMs: number;
  /** workerd CPU time over the window (all threads), ms; and less the idle object's. */
  cpuMs: number;
  netCpuMs: number;
  /** The busiest workerd thread's CPU time as a share of the window. */
  busiestThread: number;
  /** Heartbeats answered in the window. */
  heartbeats: number;
  /** Net workerd CPU per heartbeat, µs. */
  cpuPerHeartbeatUs: number;
  /** The executor processes' CPU over the window, in cores (the load generator). */
  executorsCores: number;
  /** Everything else on the machine over the window, in cores (other processes). */
  otherCores: number;
  /** Heartbeat round trips in the window, as the executors saw them, ms. */
  rttP50Ms: number | null;
  rttP99Ms: number | null;
  rttMaxMs: number | null;
  /** Heartbeats answered after more than one interval, timed out, refused. */
  late: number;
  timeouts: number;
  refused: number;
  /** Connections closed during the step (registration to the end of its calls), by code. */
  closes: Record<string, number>;
  /** Executors that failed to register, or had not when the step's deadline came. */
  failedStarts: number;
  /** Tool calls over the brain API while heartbeats went on. */
  calls: number;
  callErrors: number;
  callP50Ms: number | null;
  callP99Ms: number | null;
  callsPerSecond: number;
  /** Heartbeat round trips while the calls ran (p99), ms. */
  callRttP99Ms: number | null;
  /** The executor processes' longest event-loop delay during the step, ms. */
  executorLoopMaxMs: number | null;
  /** Why the object did not keep up at this step, if it did not. */
  behind?: string;
}

/** What the suite measured. */
export interface EdgeResult {
  executors: string;
  processes: number;
  intervalMs: number;
  windowIntervals: number;
  /** workerd RSS with the Worker loaded and no object yet, and with the empty object, bytes. */
  rssRuntime: number;
  rssEmpty: number;
  /** The Worker isolate's JS heap with the empty object, after a full GC, bytes. */
  heapEmpty: number | undefined;
  /** The idle object's workerd CPU, ms per second. */
  idleCpuMsPerSecond: number;
  /** workerd's threads, and its open-file limit (it caps the sizes). */
  threads: number;
  fileLimit: number | undefined;
  steps: EdgeStep[];
  /** Why the steps stopped before the last size, if they did. */
  stopped?: string;
  /** Sizes left out (the open-file limit). */
  skipped: number[];
}

// ---- /proc -----------------------------------------------------------------------------------

/** Pids of the processes below `root` (by their parent pid). */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(entry));
      children.set(ppid, list);
    } catch {
      // Gone meanwhile.
    }
  }
  const out: number[] = [];
  const walk = (pid: number) => {
    for (const child of children.get(pid) ?? []) {
      out.push(child);
      walk(child);
    }
  };
  walk(root);
  return out;
}

function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

/** The workerd processes this process started (through Miniflare), never anyone else's. */
function workerdPids(): number[] {
  return descendants(process.pid).filter((pid) => comm(pid) === "workerd");
}

/** The CPU time of `pids` (sum over their threads, schedstat's first field), ns, with each thread's. */
function cpuOf(pids: number[]): { total: number; threads: Map<string, number> } {
  const threads = new Map<string, number>();
  let total = 0;
  for (const pid of pids) {
    let tids: string[] = [];
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
        threads.set(`${pid}/${tid}`, ns);
        total += ns;
      } catch {
        // The thread ended.
      }
    }
  }
  return { total, threads };
}

/** CPU time the whole machine spent busy (all CPUs), ns, from /proc/stat (USER_HZ ticks: 100/s). */
function machineBusyNs(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
  const busy = line[1] + line[2] + line[3] + line[6] + line[7] + line[8];
  return busy * 1e7;
}

/** RSS of `pids`, bytes. */
function rssOf(pids: number[]): number {
  let bytes = 0;
  for (const pid of pids) {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    bytes += Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
  }
  return bytes;
}

/** The soft open-file limit of `pid`. */
function fileLimitOf(pid: number): number | undefined {
  try {
    const limits = readFileSync(`/proc/${pid}/limits`, "utf8");
    const soft = /^Max open files\s+(\d+)/m.exec(limits)?.[1];
    return soft ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}

// ---- workerd's inspector: the isolate's heap -------------------------------------------------

/**
 * The JS heap the Worker's isolate uses after a full collection, over workerd's inspector
 * (Miniflare's proxy of it). workerd runs an inspector command only when the isolate has work,
 * so `poke` makes a request meanwhile until the collection is done.
 */
async function heapAfterGc(
  mf: Miniflare,
  poke: () => Promise<unknown>,
): Promise<number | undefined> {
  const inspector = (await mf.getInspectorURL()).href.replace(/^ws/, "http");
  const targets = await (await fetch(`${inspector}json`)).json() as {
    id: string;
    webSocketDebuggerUrl: string;
  }[];
  const target = targets.find((t) => t.id === `core:user:${WORKER_NAME}`);
  if (!target) return undefined;
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  try {
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    let seq = 0;
    const waiting = new Map<number, (result: Record<string, unknown>) => void>();
    ws.on("message", (data) => {
      const message = JSON.parse(String(data)) as { id?: number; result?: Record<string, unknown> };
      if (message.id !== undefined) {
        waiting.get(message.id)?.(message.result ?? {});
        waiting.delete(message.id);
      }
    });
    const call = async (method: string): Promise<Record<string, unknown>> => {
      const id = ++seq;
      const answer = new Promise<Record<string, unknown>>((resolve) => waiting.set(id, resolve));
      ws.send(JSON.stringify({ id, method, params: {} }));
      let done = false;
      void answer.then(() => (done = true));
      for (let i = 0; !done && i < 300; i++) {
        await Promise.race([answer, sleep(100)]);
        if (!done) await poke().catch(() => {});
      }
      if (!done) throw new Error(`inspector: no answer to ${method}`);
      return await answer;
    };
    await call("HeapProfiler.enable");
    await call("HeapProfiler.collectGarbage");
    const usage = await call("Runtime.getHeapUsage");
    await call("HeapProfiler.disable");
    return Number(usage.usedSize);
  } finally {
    ws.close();
  }
}

// ---- executor processes ----------------------------------------------------------------------

const BUNDLE = join(ROOT, "node_modules/.cache/bma-bench/edge-executors.mjs");

/** A process of `ExecutorClient`s (edge-executors.ts), driven over common.ts's line protocol. */
class ExecutorProcess {
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
async function gather(children: ExecutorProcess[], reset: boolean) {
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

function percentile(sorted: number[], p: number): number | null {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

function addCloses(into: Record<string, number>, from: Record<string, number>): void {
  for (const [code, count] of Object.entries(from)) into[code] = (into[code] ?? 0) + count;
}

// ---- the run ---------------------------------------------------------------------------------

/** Runs suite 7. */
export async function runEdgeSuite(options: EdgeOptions): Promise<EdgeResult> {
  const { log, intervalMs } = options;
  const began = performance.now();
  const [bundle] = await Promise.all([
    buildWorkersBundle(),
    build({
      entryPoints: [join(ROOT, "scripts/bench/edge-executors.ts")],
      outfile: BUNDLE,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "error",
    }),
  ]);
  const children: ExecutorProcess[] = [];
  let mf: Miniflare | undefined;
  let pids: number[] = [];
  const killAll = () => {
    for (const child of children) child.kill();
    for (const pid of new Set([...pids, ...workerdPids()])) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
  };
  const onSignal = (signal: NodeJS.Signals) => {
    killAll();
    process.exit(signal === "SIGINT" ? 130 : 143);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  process.once("exit", killAll);
  try {
    log(`edge: workerd (Miniflare), heartbeat interval ${intervalMs} ms`);
    mf = new Miniflare({
      name: WORKER_NAME,
      modules: true,
      script: bundle.code,
      compatibilityDate: "2025-09-01",
      durableObjects: { BMA_HARNESS: { className: "HarnessObject", useSQLite: true } },
      bindings: {
        BMA_JWT_SECRET: EDGE.jwtSecret,
        BMA_CREDENTIALS: JSON.stringify([
          { environmentId: EDGE.environmentId, environmentKey: EDGE.environmentKey },
        ]),
        BMA_BRAIN_TOKEN: EDGE.brainToken,
        BMA_HEARTBEAT_INTERVAL_MS: String(intervalMs),
        // No token refresh during the run: its requests would add to the heartbeats' CPU.
        BMA_TOKEN_TTL_SECONDS: "86400",
      },
      host: "127.0.0.1",
      port: 0,
      // For the heap figures only (no session is attached while CPU is measured).
      inspectorPort: 0,
      log: new NoOpLog(),
    });
    const url = (await mf.ready).href.replace(/\/$/, "");
    pids = workerdPids();
    if (!pids.length) throw new Error("no workerd process found below this one");
    const fileLimit = fileLimitOf(pids[0]);
    const skipped = options.sizes.filter((n) => fileLimit !== undefined && n + 256 > fileLimit);
    const sizes = options.sizes.filter((n) => !skipped.includes(n));
    const api = `${url}/v1/harness/environments/${EDGE.environmentId}`;
    const brain = async (method: string, path: string, body?: unknown) => {
      const response = await fetch(`${api}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${EDGE.brainToken}`,
          "content-type": "application/json",
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : undefined };
    };
    const runtime = mf;
    // A cheap request to the object (404: no such executor), so the inspector's commands run.
    const poke = () => brain("GET", "/executors/exec_none");
    const heap = async () => {
      try {
        return await heapAfterGc(runtime, poke);
      } catch (error) {
        log(`edge: heap not read: ${(error as Error).message}`);
        return undefined;
      }
    };

    await sleep(1000);
    const rssRuntime = rssOf(pids);
    // The object: made by its first request.
    const listed = await brain("GET", "/executors");
    if (listed.status !== 200) throw new Error(`brain API: ${listed.status}`);
    const heapEmpty = await heap();
    await sleep(1000);
    const rssEmpty = rssOf(pids);
    const windowMs = options.windowIntervals * intervalMs;
    const idleBefore = cpuOf(pids).total;
    const idleStarted = performance.now();
    await sleep(Math.min(windowMs, 5000));
    const idleCpuMsPerSecond = (cpuOf(pids).total - idleBefore) / 1e6 /
      ((performance.now() - idleStarted) / 1000);

    for (let k = 0; k < options.processes; k++) {
      children.push(
        new ExecutorProcess([url, EDGE.environmentId, EDGE.environmentKey, `edge${k}`]),
      );
    }
    await Promise.all(children.map((c) => c.ready));

    const result: EdgeResult = {
      executors: `real ExecutorClients (executor/node.ts) in ${options.processes} Node processes`,
      processes: options.processes,
      intervalMs,
      windowIntervals: options.windowIntervals,
      rssRuntime,
      rssEmpty,
      heapEmpty,
      idleCpuMsPerSecond,
      threads: cpuOf(pids).threads.size,
      fileLimit,
      steps: [],
      skipped,
    };
    const sessions: string[] = [];
    let held = 0;
    let rssBefore = rssEmpty;
    let heapBefore = heapEmpty;
    for (const n of sizes) {
      if (performance.now() - began > options.budgetMs) {
        result.stopped = `time budget (${options.budgetMs / 1000} s) spent before ${n}`;
        break;
      }
      const added = n - held;
      const closes: Record<string, number> = {};

      // ---- join: every executor exchanges its credential, connects and registers
      log(`edge ${n}: registering ${added} more executors`);
      await gather(children, true);
      const joinStarted = performance.now();
      const joinCpu = cpuOf(pids).total;
      const share = (k: number) =>
        Math.floor(added / children.length) + (k < added % children.length ? 1 : 0);
      // Registration is bounded too: about 10 ms per executor per process, at least 30 s.
      const deadlineMs = Math.max(30_000, 10 * added);
      const joins = await Promise.all(
        children.map((c, k) =>
          c.send(
            "add",
            { count: share(k), concurrency: options.concurrency, deadlineMs },
            deadlineMs + 30_000,
          )
        ),
      );
      const unfinished = joins.reduce((s, j) => s + Number(j.unfinished ?? 0), 0);
      const registerMs = performance.now() - joinStarted;
      // Less what the object spent meanwhile idling and on the heartbeats of those already
      // held (at the rate the step before measured).
      const previous = result.steps.at(-1);
      const heldRate = previous ? previous.netCpuMs / previous.windowMs : 0;
      const registerCpuMs = (cpuOf(pids).total - joinCpu) / 1e6 -
        (idleCpuMsPerSecond / 1000 + heldRate) * registerMs;
      held = n;
      // Every executor heartbeats twice before anything is measured.
      await sleep(2 * intervalMs + 500);
      const listing = await brain("GET", "/executors");
      const connected = (listing.body?.executors ?? []).filter((e: { connected: boolean }) =>
        e.connected
      ).length;
      const joined = await gather(children, true);
      addCloses(closes, joined.closes);
      if (!sessions.length) {
        // A few sessions on different executors (of different processes), for the calls.
        for (const [k, child] of children.entries()) {
          const { ids } = await child.send("ids", { count: 2 }) as unknown as { ids: string[] };
          for (const executor_id of ids) {
            const session_id = `ses_edge_${k}_${sessions.length}`;
            const assigned = await brain("POST", "/sessions", { session_id, executor_id });
            if (assigned.status !== 201) {
              throw new Error(`assign: ${assigned.status} ${JSON.stringify(assigned.body)}`);
            }
            const ready = await brain("GET", `/sessions/${session_id}?until=ready&wait_ms=10000`);
            if (ready.status !== 200) throw new Error(`session ${session_id} not ready`);
            sessions.push(session_id);
          }
        }
      }

      // ---- memory, after a full collection
      const heapNow = await heap();
      await sleep(500);
      const rss = rssOf(pids);

      // ---- heartbeats only
      log(`edge ${n}: workerd CPU over ${windowMs / 1000} s of heartbeats`);
      const measured = await gather(children, true);
      addCloses(closes, measured.closes);
      const childPids = children.map((c) => c.process.pid!);
      const selfBefore = process.cpuUsage();
      const machineBefore = machineBusyNs();
      const before = cpuOf(pids);
      const executorsBefore = cpuOf(childPids).total;
      const started = performance.now();
      await sleep(windowMs);
      const after = cpuOf(pids);
      const executorsAfter = cpuOf(childPids).total;
      const machineAfter = machineBusyNs();
      const self = process.cpuUsage(selfBefore);
      const wall = performance.now() - started;
      const beats = await gather(children, true);
      addCloses(closes, beats.closes);
      let busiest = 0;
      for (const [tid, ns] of after.threads) {
        busiest = Math.max(busiest, ns - (before.threads.get(tid) ?? 0));
      }
      const cpuNs = after.total - before.total;
      const cpuMs = cpuNs / 1e6;
      const netCpuMs = Math.max(0, cpuMs - idleCpuMsPerSecond * wall / 1000);
      const executorsNs = executorsAfter - executorsBefore;
      const otherNs = machineAfter - machineBefore - cpuNs - executorsNs -
        (self.user + self.system) * 1000;

      // ---- tool calls from a brain outside, heartbeats going on
      log(`edge ${n}: tool calls over the brain API for ${options.callMs / 1000} s`);
      const latencies: number[] = [];
      let callErrors = 0;
      const callsStarted = performance.now();
      for (let i = 0; performance.now() - callsStarted < options.callMs; i++) {
        const at = performance.now();
        try {
          const answer = await brain(
            "POST",
            `/sessions/${sessions[i % sessions.length]}/tool-calls?wait_ms=10000`,
            { tool: "echo", input: { text: INPUT_TEXT } },
          );
          if (answer.status !== 200 || answer.body?.state !== "settled" || answer.body?.error) {
            callErrors++;
          } else latencies.push(performance.now() - at);
        } catch {
          callErrors++;
        }
      }
      const callWall = performance.now() - callsStarted;
      const during = await gather(children, true);
      addCloses(closes, during.closes);
      latencies.sort((a, b) => a - b);

      const per = (bytes: number | undefined, count: number) =>
        bytes === undefined || count <= 0 ? undefined : bytes / count;
      const step: EdgeStep = {
        n,
        registerMs,
        cpuPerRegisterUs: Math.max(0, registerCpuMs) * 1000 / added,
        connected,
        rss,
        rssPerExecutorStep: (rss - rssBefore) / added,
        rssPerExecutorTotal: (rss - rssEmpty) / n,
        heap: heapNow,
        heapPerExecutorStep: heapNow !== undefined && heapBefore !== undefined
          ? per(heapNow - heapBefore, added)
          : undefined,
        heapPerExecutorTotal: heapNow !== undefined && heapEmpty !== undefined
          ? per(heapNow - heapEmpty, n)
          : undefined,
        windowMs: wall,
        cpuMs,
        netCpuMs,
        busiestThread: busiest / 1e6 / wall,
        heartbeats: beats.answered,
        cpuPerHeartbeatUs: beats.answered ? netCpuMs * 1000 / beats.answered : 0,
        executorsCores: executorsNs / 1e6 / wall,
        otherCores: Math.max(0, otherNs) / 1e6 / wall,
        rttP50Ms: beats.rttP50Ms,
        rttP99Ms: beats.rttP99Ms,
        rttMaxMs: beats.rttMaxMs,
        late: beats.late + during.late,
        timeouts: joined.timeouts + measured.timeouts + beats.timeouts + during.timeouts,
        refused: joined.refused + measured.refused + beats.refused + during.refused,
        closes,
        failedStarts: joined.failedStarts + unfinished,
        calls: latencies.length,
        callErrors,
        callP50Ms: percentile(latencies, 0.5),
        callP99Ms: percentile(latencies, 0.99),
        callsPerSecond: latencies.length / (callWall / 1000),
        callRttP99Ms: during.rttP99Ms,
        executorLoopMaxMs: Math.max(
          ...[joined, measured, beats, during].map((phase) => phase.loopMaxMs ?? 0),
        ),
      };
      const expected = n * wall / intervalMs;
      const why: string[] = [];
      if (step.failedStarts) why.push(`${step.failedStarts} executors not registered`);
      if (connected < n) why.push(`${connected} of ${n} connected`);
      if (step.timeouts) why.push(`${step.timeouts} heartbeats timed out`);
      if (closes["4005"]) {
        const phases = ([
          ["registering", joined],
          ["sessions and GC", measured],
          ["heartbeats only", beats],
          ["calls", during],
        ] as const)
          .filter(([, phase]) => phase.closes["4005"]).map(([name, phase]) =>
            `${phase.closes["4005"]} ${name}`
          );
        why.push(`${closes["4005"]} leases expired (4005: ${phases.join(", ")})`);
      }
      if (step.late > 0.01 * (beats.answered + during.answered)) {
        why.push(`${step.late} heartbeats answered after more than one interval`);
      }
      if (beats.answered < 0.9 * expected) {
        why.push(`${beats.answered} heartbeats answered of about ${Math.round(expected)} due`);
      }
      if (callErrors) why.push(`${callErrors} tool calls failed`);
      if (
        why.length && step.executorLoopMaxMs !== null && step.executorLoopMaxMs > intervalMs / 2
      ) {
        why.push(
          `the executor processes' event loop stalled up to ${
            Math.round(step.executorLoopMaxMs)
          } ms`,
        );
      }
      if (why.length) step.behind = why.join("; ");
      result.steps.push(step);
      rssBefore = rss;
      heapBefore = heapNow;
      log(
        `edge ${n}: ${step.cpuPerHeartbeatUs.toFixed(0)} µs/heartbeat, busiest thread ${
          (step.busiestThread * 100).toFixed(0)
        }%, RSS ${(rss / 2 ** 20).toFixed(0)} MiB, heap ${
          heapNow === undefined ? "?" : (heapNow / 2 ** 20).toFixed(1)
        } MiB, call p50 ${step.callP50Ms?.toFixed(1) ?? "–"} ms${
          step.behind ? `; behind: ${step.behind}` : ""
        }`,
      );
      if (step.behind) {
        result.stopped = `the object stopped keeping up at ${n}: ${step.behind}`;
        break;
      }
    }
    return result;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    for (const child of children) child.kill();
    await Promise.all(children.map((c) => c.exited));
    if (mf) await Promise.race([mf.dispose().catch(() => {}), sleep(10_000)]);
    killAll();
    process.off("exit", killAll);
    const left = workerdPids();
    if (left.length) log(`edge: workerd ${left.join(", ")} still running after cleanup`);
  }
}

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
    `   CPU/interval: workerd's CPU time (all threads) per heartbeat interval with heartbeats only; µs/heartbeat: that less the idle object's, per heartbeat answered; busiest thread: its share of the window (the object runs on one thread); at 15 s: N executors at the default 15 s interval as a share of one core (µs/heartbeat × N / 15 s). Heartbeat: round trip seen by the executor. Calls: one in flight over the brain API (HTTP → Worker → object → executor → object → HTTP), round robin over a few sessions, heartbeats going on. Executors' / other CPU: the executor processes', and the rest of the machine's, during the CPU window.`,
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
