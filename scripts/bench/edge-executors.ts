/**
 * One process of executors for the edge-capacity benchmark (scripts/bench/edge.ts), run by
 * Node from an esbuild bundle: `edge-executors.mjs <baseUrl> <environmentId> <key> <prefix>`.
 * Its executors are the SDK's real `ExecutorClient`s (executor/node.ts) with the environment
 * credential: each exchanges it at the Worker's token endpoint, dials the connect URL it gets
 * back, registers, heartbeats at the interval the harness hands out, accepts sessions and
 * serves the bench tool `echo`.
 *
 * The only addition is a wrapper around the default dialer that times each heartbeat: the
 * `executor.heartbeat` request's frame going out to its answer coming back (one `JSON.parse` of
 * the small frames involved). Commands (common.ts's line protocol):
 *
 * - `add {count, concurrency, deadlineMs}`: starts `count` more executors, `concurrency` at a
 *   time; answers once each has registered (or failed), or at the deadline with how many had
 *   not (`unfinished`: still trying, or never started).
 * - `stats {reset}`: heartbeats sent and answered since the last reset, their round trips
 *   (p50 / p99 / max, ms), how many took longer than one interval, heartbeat timeouts and
 *   refusals, connections closed by code, dials, executors connected, tool calls served, and
 *   this process's longest event-loop delay (a heartbeat sent late is this end's doing).
 * - `ids {count}`: the executor ids of the first `count` connected executors.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { ExecutorClient } from "../../executor/node.ts";
import type { Logger } from "../../protocol/logger.ts";
import { dialWebSocket } from "../../transport/node.ts";
import type { DialOptions, Transport, TransportReceiver } from "../../transport/transport.ts";
import { report, serveCommands } from "./common.ts";
import { executorInfo } from "./sdk.ts";

const [baseUrl, environmentId, environmentKey, prefix = "edge"] = process.argv.slice(2);

/** What the heartbeat timer saw since the last `stats {reset: true}`. */
const window = {
  sent: 0,
  answered: 0,
  rtts: [] as number[],
  timeouts: 0,
  refused: 0,
  closes: {} as Record<string, number>,
  dials: 0,
  failedStarts: 0,
  calls: 0,
};
let intervalMs = 0;
/** This process's own event-loop delay: a late heartbeat may be this end's. */
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();

function reset(): void {
  window.sent = 0;
  window.answered = 0;
  window.rtts = [];
  window.timeouts = 0;
  window.refused = 0;
  window.closes = {};
  window.dials = 0;
  window.failedStarts = 0;
  window.calls = 0;
  loop.reset();
}

/** Counts the client's own warnings about heartbeats (executor/lease.ts). */
const logger: Logger = {
  debug() {},
  info() {},
  warn(message) {
    if (message.startsWith("heartbeat unanswered")) window.timeouts++;
    else if (message.startsWith("heartbeat refused")) window.refused++;
  },
  error() {},
};

const HEARTBEAT = '"executor.heartbeat"';

/** The default Node dialer, with each heartbeat's round trip timed. */
async function dial(url: string, options?: DialOptions): Promise<Transport> {
  window.dials++;
  const inner = await dialWebSocket(url, options);
  const pending = new Map<number, number>();
  void inner.closed.then(({ code }) => {
    window.closes[code] = (window.closes[code] ?? 0) + 1;
  });
  return {
    get protocol() {
      return inner.protocol;
    },
    get closed() {
      return inner.closed;
    },
    get bufferedAmount() {
      return inner.bufferedAmount;
    },
    send(frame: string) {
      if (frame.includes(HEARTBEAT)) {
        const id = (JSON.parse(frame) as { id?: unknown }).id;
        if (typeof id === "number") {
          pending.set(id, performance.now());
          window.sent++;
        }
      }
      inner.send(frame);
    },
    listen(receiver: TransportReceiver) {
      inner.listen((frame) => {
        if (pending.size && frame.length < 1024 && !frame.includes('"method"')) {
          const id = (JSON.parse(frame) as { id?: unknown }).id;
          const at = typeof id === "number" ? pending.get(id) : undefined;
          if (at !== undefined) {
            pending.delete(id as number);
            window.answered++;
            window.rtts.push(performance.now() - at);
          }
        }
        receiver(frame);
      });
    },
    close(code?: number, reason?: string) {
      inner.close(code, reason);
    },
  };
}

const clients: ExecutorClient[] = [];

function newClient(index: number): ExecutorClient {
  const client = new ExecutorClient({
    baseUrl,
    environmentId,
    environmentKey,
    executor: executorInfo(`${prefix}-${index}`),
    dial,
    logger,
  });
  client.tool("echo").handle(() => {
    window.calls++;
    return "ok";
  });
  client.onSessionAssign((session) => {
    queueMicrotask(() => void client.sessionReady(session.id).catch(() => {}));
  });
  return client;
}

async function add(
  count: number,
  concurrency: number,
  deadlineMs: number,
): Promise<Record<string, unknown>> {
  const started = performance.now();
  const deadline = started + deadlineMs;
  let next = clients.length;
  const end = clients.length + count;
  let unfinished = 0;
  const lane = async () => {
    while (next < end && performance.now() < deadline) {
      const client = newClient(next++);
      clients.push(client);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), Math.max(0, deadline - performance.now()));
      });
      try {
        const registration = await Promise.race([client.start(), late]);
        if (registration === "late") unfinished++;
        else intervalMs = registration.heartbeat_interval_ms;
      } catch {
        window.failedStarts++;
      } finally {
        clearTimeout(timer);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, lane));
  return {
    total: clients.length,
    ms: performance.now() - started,
    intervalMs,
    unfinished: unfinished + (end - next),
  };
}

function percentile(sorted: number[], p: number): number | null {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

function stats(clear: boolean): Record<string, unknown> {
  const sorted = [...window.rtts].sort((a, b) => a - b);
  const answer = {
    sent: window.sent,
    answered: window.answered,
    rttP50Ms: percentile(sorted, 0.5),
    rttP99Ms: percentile(sorted, 0.99),
    rttMaxMs: sorted.length ? sorted[sorted.length - 1] : null,
    late: intervalMs ? sorted.filter((ms) => ms > intervalMs).length : 0,
    timeouts: window.timeouts,
    refused: window.refused,
    closes: { ...window.closes },
    dials: window.dials,
    failedStarts: window.failedStarts,
    calls: window.calls,
    loopMaxMs: loop.count ? loop.max / 1e6 : null,
    executors: clients.length,
    connected: clients.filter((c) => c.connected).length,
  };
  if (clear) reset();
  return answer;
}

report({ ready: true });
await serveCommands((command) => {
  switch (command.cmd) {
    case "add":
      return add(
        Number(command.count),
        Number(command.concurrency ?? 25),
        Number(command.deadlineMs ?? 120_000),
      );
    case "stats":
      return Promise.resolve(stats(command.reset === true));
    case "ids": {
      const ids = clients.filter((c) => c.connected).slice(0, Number(command.count))
        .map((c) => c.executorId);
      return Promise.resolve({ ids });
    }
    default:
      return Promise.reject(new Error(`unknown command ${command.cmd}`));
  }
});
// Leaving: drop the sockets at once (the harness is measured, not this process).
process.exit(0);
