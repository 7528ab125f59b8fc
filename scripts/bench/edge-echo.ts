/**
 * Suite 7's baseline: what workerd itself spends on one message to a Durable Object's
 * hibernatable WebSocket and its answer, with no harness. A bare object (ECHO_OBJECT below)
 * accepts sockets through the hibernation API, as the harness object does, and answers each
 * frame shaped like an `executor.heartbeat` with a result shaped like its answer (one
 * `JSON.parse`, one `JSON.stringify`, nothing else). `ws` clients in this process each send one
 * such frame per interval, spread over it, as the suite's executors heartbeat. The figure is
 * workerd's CPU time (all threads) per answered message over a window of whole intervals, less
 * the idle runtime's: the edge harness's µs per heartbeat is read against it.
 */
import { Miniflare, NoOpLog } from "miniflare";
import WebSocket from "ws";
import { sleep } from "./common.ts";
import { cpuOf, workerdPids } from "./edge-workerd.ts";

/** The Worker: every upgrade goes to one object, which answers each frame on its socket. */
const ECHO_OBJECT = `
export class EchoObject {
  constructor(ctx) { this.ctx = ctx; }
  fetch() {
    const [client, server] = new WebSocketPair();
    this.ctx.acceptWebSocket(server);
    return new Response(null, { status: 101, webSocket: client });
  }
  webSocketMessage(ws, message) {
    const request = JSON.parse(message);
    ws.send(JSON.stringify({
      jsonrpc: "2.0",
      id: request.id,
      result: { drain: false, lease_expires_at: new Date(Date.now() + 30000).toISOString() },
    }));
  }
}
export default {
  fetch(request, env) {
    return env.ECHO.get(env.ECHO.idFromName("echo")).fetch(request);
  },
};
`;

/** What the bare object cost. */
export interface EchoObjectCost {
  /** Sockets held, each sending one frame per interval. */
  sockets: number;
  /** Messages answered in the window. */
  messages: number;
  /**
   * At least 9 in 10 of the messages due in the window were answered: the figure is the cost at
   * the interval asked for (else the clients here, or workerd, fell behind).
   */
  kept: boolean;
  /** workerd's CPU (all threads) per answered message, less the idle runtime's, µs. */
  usPerMessage: number;
  /** The busiest workerd thread's share of the window. */
  busiestThread: number;
}

/** Measures the bare object with `sockets` clients at `intervalMs`, over `windowMs`. */
export async function measureEchoObject(
  options: { sockets: number; intervalMs: number; windowMs: number },
): Promise<EchoObjectCost> {
  const { sockets: count, intervalMs, windowMs } = options;
  const before = new Set(workerdPids());
  const mf = new Miniflare({
    modules: true,
    script: ECHO_OBJECT,
    compatibilityDate: "2025-09-01",
    durableObjects: { ECHO: { className: "EchoObject", useSQLite: true } },
    host: "127.0.0.1",
    port: 0,
    log: new NoOpLog(),
  });
  const sockets: WebSocket[] = [];
  const timers: ReturnType<typeof setTimeout>[] = [];
  try {
    const url = (await mf.ready).href.replace(/^http/, "ws");
    const pids = workerdPids().filter((pid) => !before.has(pid));
    if (!pids.length) throw new Error("edge echo: no workerd process found below this one");
    await sleep(1000);
    const idleStarted = performance.now();
    const idleBefore = cpuOf(pids).total;
    await sleep(Math.min(windowMs, 3000));
    const idleNsPerMs = (cpuOf(pids).total - idleBefore) / (performance.now() - idleStarted);

    let answered = 0;
    for (let opened = 0; opened < count;) {
      const batch = Math.min(50, count - opened);
      await Promise.all(
        Array.from({ length: batch }, () =>
          new Promise<void>((resolve, reject) => {
            // As the executors' dialer over ws://: no permessage-deflate (workerd would take it).
            const ws = new WebSocket(url, { perMessageDeflate: false });
            ws.once("open", () => {
              sockets.push(ws);
              resolve();
            });
            ws.once("error", reject);
            ws.on("message", () => answered++);
          })),
      );
      opened += batch;
    }
    let id = 0;
    const send = (ws: WebSocket) =>
      ws.send(JSON.stringify({
        jsonrpc: "2.0",
        id: ++id,
        method: "executor.heartbeat",
        params: { active_sessions: [] },
      }));
    // A timer per socket, socket k first at k/count of an interval: spread as the executors'
    // heartbeats are.
    sockets.forEach((ws, k) => {
      timers.push(setTimeout(() => {
        send(ws);
        timers.push(setInterval(() => send(ws), intervalMs));
      }, k * intervalMs / count));
    });
    await sleep(2 * intervalMs);

    const cpuBefore = cpuOf(pids);
    const answeredBefore = answered;
    const started = performance.now();
    await sleep(windowMs);
    const cpuAfter = cpuOf(pids);
    const wall = performance.now() - started;
    const messages = answered - answeredBefore;
    const due = count * wall / intervalMs;
    let busiest = 0;
    for (const [tid, ns] of cpuAfter.threads) {
      busiest = Math.max(busiest, ns - (cpuBefore.threads.get(tid) ?? 0));
    }
    const netNs = Math.max(0, cpuAfter.total - cpuBefore.total - idleNsPerMs * wall);
    return {
      sockets: count,
      messages,
      kept: messages >= 0.9 * due,
      usPerMessage: messages ? netNs / 1000 / messages : 0,
      busiestThread: busiest / 1e6 / wall,
    };
  } finally {
    for (const timer of timers) clearTimeout(timer);
    for (const ws of sockets) ws.terminate();
    await Promise.race([mf.dispose().catch(() => {}), sleep(10_000)]);
    for (const pid of workerdPids().filter((pid) => !before.has(pid))) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone.
      }
    }
  }
}
