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
 * - the baseline (edge-echo.ts, measured first, size by size): workerd's CPU per message of a
 *   bare object that only answers as many sockets at the same interval, and the heartbeat's
 *   µs against it;
 * - tool calls made by a brain outside over the brain API (`POST /v1/harness/environments/<id>/
 *   sessions/<sid>/tool-calls?wait_ms=...`, one in flight, round robin over a few sessions on
 *   different executors) while the heartbeats go on: p50 / p99.
 *
 * It stops growing at the first step where the object no longer keeps up (an executor not
 * registered in time, a heartbeat timed out, a lease expired, a call failed, over 1% of
 * heartbeats late) or when the time budget is spent. workerd and every child are killed at the
 * end, on error and on SIGINT/SIGTERM too.
 */
import { join } from "node:path";
import { build } from "esbuild";
import { Miniflare, NoOpLog } from "miniflare";
import { INPUT_TEXT, sleep } from "./common.ts";
import { addCloses, BUNDLE, ExecutorProcess, gather, percentile } from "./edge-executor-process.ts";
import {
  cpuOf,
  fileLimitOf,
  heapAfterGc,
  machineBusyNs,
  rssOf,
  WORKER_NAME,
  workerdPids,
} from "./edge-workerd.ts";
import { type EchoObjectCost, measureEchoObject } from "./edge-echo.ts";
import { ROOT } from "./procs.ts";
import { buildWorkersBundle } from "./workers-bundle.ts";

/** Credentials of the benchmark's Worker (made up, local only). */
const EDGE = {
  jwtSecret: "edge-bench-signing-secret-0123456789abcdef",
  brainToken: "brain_bench_token_7c1e9a42",
  environmentId: "env_bench",
  environmentKey: "ek_bench_key_41d0c8e7a9",
} as const;

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
  /**
   * The baseline at this size: a bare object answering as many sockets at the same interval
   * (edge-echo.ts), measured before the harness ran.
   */
  echo?: EchoObjectCost;
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
    // The baseline first, size by size, in a workerd of its own that is gone before the
    // harness's starts.
    const echoes = new Map<number, EchoObjectCost>();
    const ownFileLimit = fileLimitOf(process.pid);
    for (const n of options.sizes) {
      if (ownFileLimit !== undefined && n + 256 > ownFileLimit) continue;
      log(`edge ${n}: a bare object answering ${n} sockets (the baseline)`);
      echoes.set(
        n,
        await measureEchoObject({
          sockets: n,
          intervalMs,
          windowMs: options.windowIntervals * intervalMs,
        }),
      );
    }
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
        echo: echoes.get(n),
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
        `edge ${n}: ${step.cpuPerHeartbeatUs.toFixed(0)} µs/heartbeat${
          step.echo ? ` (a bare object's message ${step.echo.usPerMessage.toFixed(0)})` : ""
        }, busiest thread ${(step.busiestThread * 100).toFixed(0)}%, RSS ${
          (rss / 2 ** 20).toFixed(0)
        } MiB, heap ${heapNow === undefined ? "?" : (heapNow / 2 ** 20).toFixed(1)} MiB, call p50 ${
          step.callP50Ms?.toFixed(1) ?? "–"
        } ms${step.behind ? `; behind: ${step.behind}` : ""}`,
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
