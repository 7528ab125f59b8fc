/**
 * Suite 3: one Node harness holding N executors over real WebSockets, the executors in
 * separate processes (2,500 `ExecutorClient`s each). For each N: heap and RSS per executor
 * against a bare `ws` server holding N idle connections (same client spread), the harness's
 * CPU while the executors heartbeat at the default interval, and the time until all N are
 * registered again after a graceful harness restart on the same port.
 */
import { Child } from "./procs.ts";
import { sleep } from "./common.ts";

/** Executors (or idle connections) per client process. */
const PER_PROCESS = 2_500;

/** What one N measured. */
export interface ScaleResult {
  n: number;
  /** Bare ws: heap and RSS bytes per idle connection. */
  rawHeapPerConn: number;
  rawRssPerConn: number;
  /** Harness: heap and RSS bytes per registered executor. */
  heapPerExecutor: number;
  rssPerExecutor: number;
  /** Harness CPU (user + system) over the window, as a fraction of one core. */
  cpuFraction: number;
  /** Executors whose lease a heartbeat renewed during the window, per second. */
  heartbeatsPerSecond: number;
  /** The window, ms. */
  windowMs: number;
  /** From the old harness's exit to all N registered on the new one, ms. */
  reregisterMs: number;
  /** From the new harness listening to all N registered, ms. */
  reregisterAfterListenMs: number;
}

/** How the suite runs. */
export interface ScaleOptions {
  sizes: number[];
  /** CPU measurement window, ms. */
  windowMs: number;
  log: (line: string) => void;
}

const NODE_FLAGS = { runtimeFlags: ["--expose-gc"], raiseFileLimit: true };

/** Starts `n` clients of a scale role, 2,500 per process; resolves once all are ready. */
export async function startClients(
  role: string,
  url: string,
  n: number,
  prefix: string,
): Promise<Child[]> {
  const children: Child[] = [];
  for (let start = 0, k = 0; start < n; start += PER_PROCESS, k++) {
    const count = Math.min(PER_PROCESS, n - start);
    const args = role === "idle-ws-clients"
      ? [role, url, String(count)]
      : [role, url, String(count), `${prefix}${k}`];
    children.push(await Child.start("node", args, { ...NODE_FLAGS, label: `${role} ${k}` }));
  }
  await Promise.all(children.map((c) => c.ready));
  return children;
}

async function stopAll(children: (Child | undefined)[]): Promise<void> {
  // Servers first: the side that closes first holds TIME_WAIT, and the servers' ports are fixed.
  for (const child of children) await child?.kill();
}

/** The bare ws baseline for `n` idle connections. */
async function rawBaseline(n: number, host: string): Promise<{ heap: number; rss: number }> {
  const server = await Child.start("node", ["idle-ws-server", host], {
    ...NODE_FLAGS,
    label: "idle-ws-server",
  });
  let clients: Child[] = [];
  try {
    const { url } = await server.ready;
    const before = await server.send("mem");
    clients = await startClients("idle-ws-clients", String(url), n, "");
    await server.send("wait", { count: n });
    await sleep(1000);
    const after = await server.send("mem");
    return {
      heap: (Number(after.heapUsed) - Number(before.heapUsed)) / n,
      rss: (Number(after.rss) - Number(before.rss)) / n,
    };
  } finally {
    await stopAll([server, ...clients]);
  }
}

/** Runs suite 3. */
export async function runScaleSuite(options: ScaleOptions): Promise<ScaleResult[]> {
  const results: ScaleResult[] = [];
  let hostIndex = 1;
  for (const n of options.sizes) {
    // A loopback address of its own per N: no port of an earlier round is still in TIME_WAIT.
    const host = `127.0.0.${++hostIndex}`;
    options.log(`scale ${n}: bare ws baseline`);
    const raw = await rawBaseline(n, host);
    options.log(`scale ${n}: harness`);
    let harness = await Child.start("node", ["scale-harness", host, "0"], {
      ...NODE_FLAGS,
      label: "scale-harness",
    });
    let executors: Child[] = [];
    try {
      const { url } = await harness.ready;
      const port = new URL(String(url)).port;
      const before = await harness.send("mem");
      const started = performance.now();
      executors = await startClients("scale-executors", String(url), n, "x");
      await harness.send("wait", { count: n });
      options.log(
        `scale ${n}: ${n} registered in ${((performance.now() - started) / 1000).toFixed(1)} s`,
      );
      await sleep(2000);
      const after = await harness.send("mem");
      options.log(`scale ${n}: harness CPU over ${options.windowMs / 1000} s of heartbeats`);
      const cpu = await harness.send("cpu", { ms: options.windowMs });
      options.log(`scale ${n}: restart`);
      await harness.stop(30_000);
      const down = Date.now();
      harness = await Child.start("node", ["scale-harness", host, port], {
        ...NODE_FLAGS,
        label: "scale-harness (restarted)",
      });
      const listening = Number((await harness.ready).at);
      const { at } = await harness.send("wait", { count: n });
      results.push({
        n,
        rawHeapPerConn: raw.heap,
        rawRssPerConn: raw.rss,
        heapPerExecutor: (Number(after.heapUsed) - Number(before.heapUsed)) / n,
        rssPerExecutor: (Number(after.rss) - Number(before.rss)) / n,
        cpuFraction: (Number(cpu.userUs) + Number(cpu.systemUs)) / 1000 / Number(cpu.ms),
        heartbeatsPerSecond: (Number(cpu.heartbeats) / Number(cpu.ms)) * 1000,
        windowMs: Number(cpu.ms),
        reregisterMs: Number(at) - down,
        reregisterAfterListenMs: Number(at) - listening,
      });
    } finally {
      await stopAll([harness, ...executors]);
    }
  }
  return results;
}
