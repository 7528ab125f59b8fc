/**
 * Suite 8, the failover time: two `bma-harness serve --standby` processes on one PostgreSQL table
 * (nothing else shared), the readiness proxy in front (tests/helpers/ready-proxy.ts), N
 * `ExecutorClient`s behind it, each holding a session and emitting durable events one after
 * another; then `kill -9` of the active harness. Measured: from the kill to each executor's first
 * event acknowledged after it (by the standby, once it has taken the store over and the
 * executor has registered there again), and the slowest of them: every executor resumed. At the
 * default lease (renewals every 5 s, a silent holder stale after 15 s) and at a shorter one.
 *
 * A holder record names its machine and pid, and a harness on the same machine as the holder
 * sees at once that the holder's process is gone: it takes over at its next poll (one renewal
 * interval), not after the lease. Across machines only the lease tells. So each harness runs in
 * a UTS namespace of its own (`unshare --uts`, another host name: two "machines" with nothing
 * shared but the database), and, for comparison, both on this one when asked.
 *
 * The harnesses run the CLI's sources (Node, through tsx), as tests/cli/failover-rig.ts does;
 * the executors run in this process.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { ExecutorClient } from "../../executor/node.ts";
import {
  Brain,
  BRAIN_TOKEN,
  ENVIRONMENT_KEY,
  JWT_SECRET,
  readyStatus,
  until,
} from "../../tests/cli/failover-rig.ts";
import { startReadyProxy } from "../../tests/helpers/ready-proxy.ts";
import { ROOT } from "./procs.ts";

const HARNESS = join(ROOT, "cli/harness.node.ts");
const INFO = { os: "linux", arch: "x64", version: "1.0.0" };

/** One setting measured. */
export interface FailoverCase {
  /** Its label in the results. */
  label: string;
  /** `--store-renew-ms`; undefined: the default (none given). */
  renewMs: number | undefined;
  /** Each harness under a host name of its own (see the module's comment). */
  twoHosts: boolean;
}

/** Whether this process may give a child a host name of its own (`unshare --uts`: root). */
export function canUnshareUts(): boolean {
  return spawnSync("unshare", ["--uts", "true"]).status === 0;
}

/** How the suite runs. */
export interface FailoverOptions {
  /** The PostgreSQL database the harnesses share (a new table per repetition). */
  postgresUrl: string;
  /** The settings to measure, in order. */
  cases: readonly FailoverCase[];
  /** Repetitions per value. */
  runs: number;
  /** Executors. */
  executors: number;
  log: (line: string) => void;
}

/** One repetition: ms from the kill to each executor's first acknowledged event after it. */
export interface FailoverRun {
  perExecutorMs: number[];
  /** The slowest executor: every executor resumed. */
  allMs: number;
  /** From the kill to the standby answering `/readyz` 200. */
  standbyServingMs: number;
}

/** The runs per case label. */
export type FailoverResults = Record<string, FailoverRun[]>;

interface HarnessChild {
  child: ChildProcess;
  url: string;
}

/** `bma-harness serve --standby` on `table`; resolves once it listens. */
function startHarness(
  postgresUrl: string,
  table: string,
  renewMs: number | undefined,
  host: string | undefined,
): Promise<HarnessChild> {
  const node = [
    process.execPath,
    "--import",
    "tsx",
    HARNESS,
    "serve",
    "--port",
    "0",
    "--store",
    postgresUrl,
    "--store-table",
    table,
    "--standby",
    "--log-format",
    "json",
    ...(renewMs === undefined ? [] : ["--store-renew-ms", String(renewMs)]),
  ];
  // `unshare` and `sh` exec the harness: the child's pid is the harness's, for the kill -9.
  const [command, args] = host === undefined
    ? [node[0], node.slice(1)]
    : ["unshare", ["--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, ...node]];
  const child = spawn(command, args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH ?? "",
      HOME: process.env.HOME ?? "/tmp",
      BMA_JWT_SECRET: JWT_SECRET,
      BMA_CREDENTIALS: JSON.stringify([{
        environmentId: "env_1",
        environmentKey: ENVIRONMENT_KEY,
      }]),
      BMA_BRAIN_TOKEN: BRAIN_TOKEN,
    },
  });
  let err = "";
  child.stderr!.on("data", (chunk) => (err = (err + chunk).slice(-2000)));
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const found = /"message":"listening (http:\/\/[^"]+)"/.exec(line);
      if (found) resolve({ child, url: found[1].replace(/\/$/, "") });
    });
    child.once("exit", (code) => reject(new Error(`bma-harness serve exited (${code}): ${err}`)));
  });
}

/** An executor holding a session, emitting durable events one after another. */
class EmittingExecutor {
  readonly client: ExecutorClient;
  /** When each event was acknowledged (performance.now()). */
  readonly acked: number[] = [];
  #running = false;
  #loop: Promise<void> | undefined;

  constructor(base: string, readonly name: string) {
    this.client = new ExecutorClient({
      baseUrl: base,
      environmentId: "env_1",
      environmentKey: ENVIRONMENT_KEY,
      executor: { name, ...INFO },
      // Close to the client's defaults' first steps; the proxy refuses until the standby serves.
      reconnect: { initialDelayMs: 100, maxDelayMs: 1000 },
      retry: { initialDelayMs: 100, maxDelayMs: 1000 },
    });
  }

  emit(sessionId: string): void {
    this.#running = true;
    this.#loop = (async () => {
      for (let n = 0; this.#running; n++) {
        try {
          await this.client.call("session.event", {
            session_id: sessionId,
            event: { type: "tick", n },
          });
          this.acked.push(performance.now());
        } catch {
          if (this.#running) await new Promise((resolve) => setTimeout(resolve, 50));
        }
        // Not a busy loop: the figure is the time to resume, not the rate.
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
  }

  async stop(): Promise<void> {
    this.#running = false;
    await this.client.stop().catch(() => {});
    await this.#loop;
  }
}

function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGKILL");
  return exited;
}

async function oneRun(
  options: FailoverOptions,
  table: string,
  { renewMs, twoHosts }: FailoverCase,
): Promise<FailoverRun> {
  const first = await startHarness(
    options.postgresUrl,
    table,
    renewMs,
    twoHosts ? "bench-active" : undefined,
  );
  const started: HarnessChild[] = [first];
  const executors: EmittingExecutor[] = [];
  let proxy: Awaited<ReturnType<typeof startReadyProxy>> | undefined;
  try {
    await until(
      "the first harness serves",
      async () => (await readyStatus(first.url)) === "serving",
    );
    const second = await startHarness(
      options.postgresUrl,
      table,
      renewMs,
      twoHosts ? "bench-standby" : undefined,
    );
    started.push(second);
    await until("the second stands by", async () => (await readyStatus(second.url)) === "standby");
    proxy = await startReadyProxy([first.url, second.url]);
    const brain = new Brain(proxy.url);
    for (let i = 0; i < options.executors; i++) {
      executors.push(new EmittingExecutor(proxy.url, `bench-${i}`));
    }
    await Promise.all(executors.map((e) => e.client.start()));
    const listed = async () =>
      (await brain.request("/executors")).body.executors as {
        executor_id: string;
        executor: { name: string };
      }[];
    await until(
      `${options.executors} executors registered`,
      async () => (await listed()).length === options.executors,
    );
    for (const { executor_id, executor } of await listed()) {
      const session = `ses_${executor.name}`;
      await brain.retry("/sessions", {
        session_id: session,
        executor_id,
        metadata: { source: "harness" },
      }, 201);
      await brain.retry(`/sessions/${session}?until=ready&wait_ms=10000`, undefined, 200);
      executors.find((e) => e.name === executor.name)!.emit(session);
    }
    // Every executor's events flow before the kill.
    await until("events acknowledged", () => executors.every((e) => e.acked.length >= 3));
    const killedAt = performance.now();
    await kill(first.child);
    let servingAt = Infinity;
    await until("the standby serves", async () => {
      if ((await readyStatus(second.url)) !== "serving") return false;
      servingAt = performance.now();
      return true;
    }, 120_000);
    const resumedAt = (e: EmittingExecutor) => e.acked.find((t) => t > killedAt);
    await until(
      "every executor resumed",
      () => executors.every((e) => resumedAt(e) !== undefined),
      120_000,
    );
    const perExecutorMs = executors.map((e) => resumedAt(e)! - killedAt);
    return {
      perExecutorMs,
      allMs: Math.max(...perExecutorMs),
      standbyServingMs: servingAt - killedAt,
    };
  } finally {
    await Promise.all(executors.map((e) => e.stop()));
    await proxy?.close();
    await Promise.all(started.map((h) => kill(h.child)));
  }
}

/** Runs the failover suite. */
export async function runFailoverSuite(options: FailoverOptions): Promise<FailoverResults> {
  const results: FailoverResults = {};
  let tables = 0;
  for (const failoverCase of options.cases) {
    const list: FailoverRun[] = (results[failoverCase.label] = []);
    for (let run = 1; run <= options.runs; run++) {
      options.log(`failover, ${failoverCase.label}, run ${run}/${options.runs}`);
      list.push(await oneRun(options, `bench_failover_${++tables}`, failoverCase));
    }
  }
  return results;
}
