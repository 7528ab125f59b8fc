/**
 * What the edge benchmark (edge.ts) reads of workerd: its processes, CPU time, RSS and open-file
 * limit from /proc, and its Worker isolate's JS heap over workerd's inspector.
 */
import { readdirSync, readFileSync } from "node:fs";
import type { Miniflare } from "miniflare";
import WebSocket from "ws";
import { sleep } from "./common.ts";

/** The Worker's name in Miniflare: its isolate is the inspector target `core:user:<name>`. */
export const WORKER_NAME = "bench";

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
export function workerdPids(): number[] {
  return descendants(process.pid).filter((pid) => comm(pid) === "workerd");
}

/** The CPU time of `pids` (sum over their threads, schedstat's first field), ns, with each thread's. */
export function cpuOf(pids: number[]): { total: number; threads: Map<string, number> } {
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
export function machineBusyNs(): number {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).map(Number);
  // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
  const busy = line[1] + line[2] + line[3] + line[6] + line[7] + line[8];
  return busy * 1e7;
}

/** RSS of `pids`, bytes. */
export function rssOf(pids: number[]): number {
  let bytes = 0;
  for (const pid of pids) {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    bytes += Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? 0) * 1024;
  }
  return bytes;
}

/** The soft open-file limit of `pid`. */
export function fileLimitOf(pid: number): number | undefined {
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
export async function heapAfterGc(
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
