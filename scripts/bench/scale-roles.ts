/**
 * The processes of the harness-scale benchmark (Node; the orchestrator starts them with
 * `--expose-gc`):
 *
 * - `scale-harness <host> <port>`: one `Harness` (harness/node.ts) serving TCP, nothing added
 *   to it. Commands: `mem` (heap and RSS after a full GC), `wait {count}` (until that many
 *   executors are registered and connected; answers the wall-clock time), `cpu {ms}` (CPU time
 *   this process used over `ms`, and how many executors renewed their lease meanwhile),
 *   `snapshot {path}` (a heap snapshot after a full GC, for scripts/bench/heap.ts).
 * - `scale-executors <url> <count> <prefix>`: `count` `ExecutorClient`s (executor/node.ts)
 *   that register and heartbeat at the interval the harness gives them.
 * - `idle-ws-server <host>` / `idle-ws-clients <url> <count>`: the baseline, a bare `ws` server
 *   holding idle connections, with the same `mem`, `wait` and `snapshot` commands.
 */
import { createServer as createHttpServer } from "node:http";
import { writeHeapSnapshot } from "node:v8";
import { WebSocket as WsWebSocket, WebSocketServer } from "ws";
import { DEFAULT_HEARTBEAT_INTERVAL_MS, Harness } from "../../harness/node.ts";
import { ExecutorClient } from "../../executor/node.ts";
import { type Command, report, serveCommands, sleep } from "./common.ts";
import { executorInfo } from "./sdk.ts";

/** Heap and RSS after a full collection (the process runs with --expose-gc). */
async function memory(): Promise<Record<string, number>> {
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let i = 0; i < 3; i++) {
    gc?.();
    await sleep(50);
  }
  const usage = process.memoryUsage();
  return {
    heapUsed: usage.heapUsed,
    rss: usage.rss,
    external: usage.external,
    arrayBuffers: usage.arrayBuffers,
    gc: gc ? 1 : 0,
  };
}

/** Writes a heap snapshot to `path` after a full collection (for scripts/bench/heap.ts). */
async function snapshot(path: string): Promise<Record<string, unknown>> {
  await memory();
  return { path: writeHeapSnapshot(path) };
}

/** Waits until `count()` reaches `want`, polling. */
async function until(count: () => number, want: number): Promise<number> {
  while (count() < want) await sleep(20);
  return Date.now();
}

async function scaleHarness(host: string, port: number): Promise<void> {
  const harness = new Harness({ insecureNoAuth: true });
  const server = await harness.serve({ hostname: host, port });
  const connected = () => harness.executors.filter((e) => e.connected).length;
  report({ ready: true, url: server.url, at: Date.now() });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await harness.close();
    await server.close();
  };
  process.once("SIGTERM", () => void close().then(() => process.exit(0)));
  await serveCommands(async (command: Command) => {
    switch (command.cmd) {
      case "mem":
        return { ...(await memory()), executors: connected() };
      case "snapshot":
        return await snapshot(String(command.path));
      case "wait":
        return { at: await until(connected, Number(command.count)) };
      case "cpu": {
        const from = Date.now();
        const before = process.cpuUsage();
        const started = performance.now();
        await sleep(Number(command.ms));
        const used = process.cpuUsage(before);
        // A heartbeat renews the lease to two intervals from its arrival.
        const lease = 2 * DEFAULT_HEARTBEAT_INTERVAL_MS;
        const beat = harness.executors.filter((e) => (e.leaseExpiresAt ?? 0) - lease >= from);
        return {
          userUs: used.user,
          systemUs: used.system,
          ms: performance.now() - started,
          heartbeats: beat.length,
          executors: connected(),
        };
      }
      default:
        throw new Error(`unknown command ${command.cmd}`);
    }
  });
  await close();
}

async function scaleExecutors(url: string, count: number, prefix: string): Promise<void> {
  const clients: ExecutorClient[] = [];
  const batch = 250;
  for (let start = 0; start < count; start += batch) {
    const started = [];
    for (let i = start; i < Math.min(count, start + batch); i++) {
      const client = new ExecutorClient({
        harnessUrl: url,
        executor: executorInfo(`${prefix}-${i}`),
      });
      client.tool("echo").handle(() => "ok");
      clients.push(client);
      started.push(client.start());
    }
    await Promise.all(started);
  }
  report({ ready: true, count: clients.length });
  await serveCommands((command) => {
    if (command.cmd === "connected") {
      return Promise.resolve({ connected: clients.filter((c) => c.connected).length });
    }
    return Promise.reject(new Error(`unknown command ${command.cmd}`));
  });
  // Leaving: drop the sockets at once (the harness is measured, not this process).
  process.exit(0);
}

async function idleServer(host: string): Promise<void> {
  const http = createHttpServer();
  const wss = new WebSocketServer({ server: http });
  wss.on("connection", (ws) => ws.on("error", () => {}));
  await new Promise<void>((resolve) => http.listen(0, host, resolve));
  const port = (http.address() as { port: number }).port;
  report({ ready: true, url: `ws://${host}:${port}` });
  await serveCommands(async (command) => {
    if (command.cmd === "mem") return { ...(await memory()), connections: wss.clients.size };
    if (command.cmd === "snapshot") return await snapshot(String(command.path));
    if (command.cmd === "wait") {
      return { at: await until(() => wss.clients.size, Number(command.count)) };
    }
    throw new Error(`unknown command ${command.cmd}`);
  });
  for (const client of wss.clients) client.terminate();
  http.close();
}

async function idleClients(url: string, count: number): Promise<void> {
  const sockets: WsWebSocket[] = [];
  const batch = 250;
  for (let start = 0; start < count; start += batch) {
    const opening = [];
    for (let i = start; i < Math.min(count, start + batch); i++) {
      const socket = new WsWebSocket(url);
      sockets.push(socket);
      opening.push(
        new Promise<void>((resolve, reject) => {
          socket.once("open", () => resolve());
          socket.once("error", reject);
        }),
      );
    }
    await Promise.all(opening);
  }
  report({ ready: true, count: sockets.length });
  await serveCommands(() => Promise.reject(new Error("no commands")));
  process.exit(0);
}

/** Runs one of the scale roles. */
export async function runScaleRole(role: string | undefined, args: string[]): Promise<void> {
  switch (role) {
    case "scale-harness":
      return await scaleHarness(args[0], Number(args[1] ?? 0));
    case "scale-executors":
      return await scaleExecutors(args[0], Number(args[1]), args[2] ?? "exec");
    case "idle-ws-server":
      return await idleServer(args[0]);
    case "idle-ws-clients":
      return await idleClients(args[0], Number(args[1]));
    default:
      throw new Error(`unknown role ${role}`);
  }
}
