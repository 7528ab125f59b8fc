/**
 * Servers close what is not a protocol peer, with raw sockets (node:net) on 127.0.0.1 and Unix
 * sockets: connections that sent part of an upgrade's headers (or nothing, or a header now and
 * then) are closed once the handshake deadline passes; beyond the cap of connections that have
 * not registered, upgrades get HTTP 503 while registered executors keep working. On the
 * `node:http` server (every runtime) and on the runtime's own preset.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DialError } from "../../mod.ts";
import { type ConnectRequest, Harness, type HarnessOptions } from "../../harness/node.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { ExecutorPeer, OFFERED, registerParams } from "../helpers/executor-peer.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
/** This runtime's harness preset (Bun: `Bun.serve`; Deno: `ws` for TCP, `Deno.serve` for Unix). */
const preset = await import(`../../harness/${RUNTIME}.ts`) as { Harness: typeof Harness };

const PARTIAL = "GET /v1/executors/connect HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n";

type Where = { port: number; host: string } | { path: string };

/** A raw socket that sends `first` (if any) once connected, then `drip` every 100 ms. */
function rawSocket(where: Where, first: string, drip?: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(where as { port: number; host: string }, () => {
      if (first) socket.write(first);
      if (drip) {
        const timer = setInterval(() => socket.writable && socket.write(drip), 100);
        socket.once("close", () => clearInterval(timer));
      }
      resolve(socket);
    });
    socket.once("error", reject);
  });
}

/**
 * Resolves when the server has closed `socket`. What the server may write first is read and
 * dropped: a socket left paused with unread bytes need not report the end behind them.
 */
function closedByServer(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    socket.on("error", () => {});
    if (socket.destroyed || socket.readableEnded) resolve();
    else {
      socket.once("close", () => resolve());
      socket.resume();
    }
  });
}

/**
 * Resolves when the server has closed every socket of `sockets`; fails after `ms` naming the
 * kinds of those still open, where an unbounded wait would leave only the runner's timeout.
 */
async function allClosedByServer(sockets: [string, Socket][], ms: number): Promise<void> {
  const open = new Set(sockets.map(([kind], i) => `${kind} #${i}`));
  const closed = Promise.all(
    sockets.map(([kind, socket], i) =>
      closedByServer(socket).then(() => open.delete(`${kind} #${i}`))
    ),
  );
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`still open after ${ms} ms: ${[...open].join(", ")}`)),
      ms,
    );
  });
  try {
    await Promise.race([closed, late]);
  } finally {
    clearTimeout(timer);
  }
}

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function start(
  HarnessClass: typeof Harness,
  options: HarnessOptions,
  unix: boolean,
): Promise<{ harness: Harness; url: string; where: Where }> {
  const harness = new HarnessClass({ insecureNoAuth: true, ...options });
  cleanups.push(() => harness.close());
  if (unix) {
    const dir = mkdtempSync(join(tmpdir(), "bma-half-open-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "harness.sock");
    const server = await harness.serveUnix(path);
    cleanups.push(() => server.close());
    return { harness, url: server.url, where: { path } };
  }
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  cleanups.push(() => server.close());
  return {
    harness,
    url: server.url,
    where: { host: "127.0.0.1", port: Number(new URL(server.httpUrl).port) },
  };
}

/** An executor registered over a real WebSocket, answering tool calls. */
async function registered(harness: Harness, url: string) {
  const peer = await ExecutorPeer.dial(url);
  cleanups.push(() => peer.close());
  const result = await peer.start();
  return { peer, executor: harness.executor(result.executor_id)! };
}

/** A bash call on `executor`, answered by `peer`, completes. */
async function serves(executor: Awaited<ReturnType<typeof registered>>, session: string) {
  const handle = await executor.executor.assignSession({ session_id: session });
  const call = handle.tools.bash.call({ command: "true" });
  await executor.peer.completeBash(await executor.peer.nextToolCall(), "still here");
  assert.equal((await call).structured_content?.stdout, "still here");
}

for (const unix of [false, true]) {
  const over = unix ? "a Unix socket" : "TCP";
  describe(`node:http server over ${over}: half-open upgrades`, { timeout: 30_000 }, () => {
    it("closes 50 sockets that sent part of an upgrade's headers, and those that sent nothing or trickle, within the deadline", async () => {
      const { harness, url, where } = await start(Harness, { handshakeTimeoutMs: 300 }, unix);
      const executor = await registered(harness, url);
      const sockets = await Promise.all([
        ...Array.from({ length: 50 }, () => rawSocket(where, PARTIAL)),
        rawSocket(where, ""),
        rawSocket(where, PARTIAL, "X-Trickle: 1\r\n"),
      ]);
      cleanups.push(() => sockets.forEach((s) => s.destroy()));
      const kinds = sockets.map((socket, i): [string, Socket] => [
        i < 50 ? "partial" : i === 50 ? "silent" : "trickling",
        socket,
      ]);
      // 300 ms each; the bound is for a server that never closes one.
      await allClosedByServer(kinds, 15_000);
      // The server serves on: the executor registered before, and a new one.
      await serves(executor, "ses_after_half_open");
      const next = await ExecutorPeer.dial(url);
      cleanups.push(() => next.close());
      assert.match((await next.start()).executor_id, /^exec_/);
    });
  });
}

describe("Bun.serve (harness/bun.ts): half-open upgrades", { timeout: 30_000 }, () => {
  it("closes sockets that sent part of an upgrade's headers by itself (after about 10 s)", {
    skip: RUNTIME === "bun" ? false : "Bun.serve runs on Bun",
  }, async () => {
    const { harness, url, where } = await start(preset.Harness, {}, false);
    const executor = await registered(harness, url);
    const sockets = await Promise.all(Array.from({ length: 10 }, () => rawSocket(where, PARTIAL)));
    cleanups.push(() => sockets.forEach((s) => s.destroy()));
    await allClosedByServer(sockets.map((socket) => ["partial", socket]), 25_000);
    await serves(executor, "ses_after_bun_half_open");
  });
});

const SERVERS: [string, typeof Harness][] = RUNTIME === "node"
  ? [["node:http", Harness]]
  : [["node:http", Harness], [`harness/${RUNTIME}.ts`, preset.Harness]];
for (const [name, HarnessClass] of SERVERS) {
  for (const unix of [false, true]) {
    const over = unix ? "a Unix socket" : "TCP";
    describe(
      `${name} over ${over}: the cap on connections not registered`,
      { timeout: 30_000 },
      () => {
        it("refuses the 4th unregistered connection with 503; registered executors keep working; a slot frees when one registers or leaves", async () => {
          const { harness, url } = await start(
            HarnessClass,
            { maxUnregisteredConnections: 3 },
            unix,
          );
          const executor = await registered(harness, url);
          const idle = await Promise.all(Array.from({ length: 3 }, () => ExecutorPeer.dial(url)));
          cleanups.push(() => Promise.all(idle.map((p) => p.close())));
          await assert.rejects(
            dialWebSocket(url, { protocols: OFFERED }),
            (error: unknown) => error instanceof DialError && error.status === 503,
          );
          await serves(executor, "ses_capped");
          assert.equal((await executor.peer.peer.call("executor.heartbeat", {})).drain, false);
          // One of them registers: its slot is free again.
          await idle[0].start(registerParams());
          const fourth = await ExecutorPeer.dial(url);
          cleanups.push(() => fourth.close());
          await assert.rejects(
            dialWebSocket(url, { protocols: OFFERED }),
            (error: unknown) => error instanceof DialError && error.status === 503,
          );
          // One leaves without registering: another slot.
          await idle[1].close();
          await idle[1].peer.closed;
          await waitFor(async () => {
            const probe = await dialWebSocket(url, { protocols: OFFERED }).catch(() => undefined);
            probe?.close();
            return probe !== undefined;
          });
        });
      },
    );
  }
}

describe("the cap counts upgrades still being authenticated", { timeout: 20_000 }, () => {
  it("refuses with 503 before authenticate runs once the cap is reached", async () => {
    const waiting: (() => void)[] = [];
    let calls = 0;
    const authenticate = (request: ConnectRequest) => {
      calls++;
      if (request.token !== "slow") return {};
      return new Promise<Record<string, never>>((resolve) => waiting.push(() => resolve({})));
    };
    const { url } = await start(Harness, { authenticate, maxUnregisteredConnections: 2 }, false);
    const slow = [1, 2].map(() =>
      dialWebSocket(url, { protocols: OFFERED, headers: { authorization: "Bearer slow" } })
    );
    await waitFor(() => Promise.resolve(waiting.length === 2));
    await assert.rejects(
      dialWebSocket(url, { protocols: OFFERED, headers: { authorization: "Bearer fast" } }),
      (error: unknown) => error instanceof DialError && error.status === 503,
    );
    assert.equal(calls, 2, "authenticate did not run for the refused upgrade");
    for (const release of waiting) release();
    for (const transport of await Promise.all(slow)) cleanups.push(() => transport.close());
  });
});

/** Polls `check` between short sleeps until it holds (bounded by the test's timeout). */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((resolve) => setTimeout(resolve, 20));
}
