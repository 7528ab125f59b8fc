/**
 * The harness's unsent bytes are bounded in total, not only per connection: 50 registered
 * executors on real sockets to 127.0.0.1 that stop reading, each asking for 6 MiB of answers
 * (heartbeats whose 256 KiB ids come back in the answers), would leave ~100 MiB queued in the
 * harness (each far within its own 64 MiB bound). With `maxUnsentBytes` the connections holding
 * the most are ended until the rest fit, and what the harness holds stays within the budget:
 * measured on the server's own sockets, not by the harness's count. An executor that reads goes
 * on working meanwhile and after.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import type { CloseInfo, Transport } from "../../mod.ts";
import { Harness, type HarnessServer } from "../../harness/node.ts";
import { dialWebSocket, serveWebSocket } from "../../transport/node.ts";
import { OFFERED, registerParams } from "../helpers/executor-peer.ts";

const STALLED = 50;
const ANSWERS = 24;
const ID_BYTES = 256 * 1024;
const BUDGET = 8 * 1024 * 1024;

/** A server-side transport whose incoming frames are counted (what the harness has taken). */
class CountedTransport implements Transport {
  received = 0;
  constructor(readonly inner: Transport) {}
  get protocol(): string {
    return this.inner.protocol;
  }
  get closed(): Promise<CloseInfo> {
    return this.inner.closed;
  }
  get bufferedAmount(): number | undefined {
    return this.inner.bufferedAmount;
  }
  send(frame: string): void {
    this.inner.send(frame);
  }
  listen(receiver: (frame: string) => void): void {
    this.inner.listen((frame) => {
      this.received++;
      receiver(frame);
    });
  }
  close(code?: number, reason?: string): void {
    this.inner.close(code, reason);
  }
  abort(code?: number, reason?: string): void {
    if (this.inner.abort) this.inner.abort(code, reason);
    else this.inner.close(code, reason);
  }
}

/** One masked (with a zero key: the payload as is) client text frame. */
function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const head = payload.length < 126 ? Buffer.alloc(6) : Buffer.alloc(14);
  head[0] = 0x81;
  if (payload.length < 126) head[1] = 0x80 | payload.length;
  else {
    head[1] = 0x80 | 127;
    head.writeBigUInt64BE(BigInt(payload.length), 2);
  }
  return Buffer.concat([head, payload]);
}

/**
 * An executor that registers, asks for `ANSWERS` large answers and reads nothing, not even the
 * upgrade's answer: a node:net socket (Node, Deno and Bun) paused from the start.
 */
function stalledExecutor(url: string, index: number): Socket {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  socket.pause();
  socket.on("error", () => {}); // the harness drops it
  const key = Buffer.alloc(16, index).toString("base64");
  socket.write(
    `GET / HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n` +
      `Sec-WebSocket-Protocol: ${OFFERED.join(", ")}\r\n\r\n`,
  );
  const params = registerParams({ environment_id: "", machine_id: `m_stalled_${index}` });
  socket.write(clientFrame(JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "executor.register",
    params,
  })));
  const id = "i".repeat(ID_BYTES);
  for (let i = 0; i < ANSWERS; i++) {
    socket.write(clientFrame(JSON.stringify({
      jsonrpc: "2.0",
      id: `${id}${i}`,
      method: "executor.heartbeat",
      params: {},
    })));
  }
  return socket;
}

/** Resolves once `done()` holds, looking every few milliseconds (the test's timeout bounds it). */
async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 20));
}

describe("Harness: a budget of unsent bytes across connections", { timeout: 240_000 }, () => {
  const transports: CountedTransport[] = [];
  const closes = new Map<CountedTransport, CloseInfo>();
  let harness: Harness;
  let server: HarnessServer;
  let reader: Transport;
  const sockets: Socket[] = [];

  before(async () => {
    harness = new Harness({
      insecureNoAuth: true,
      maxUnsentBytes: BUDGET,
      // No lease runs out while the machine is busy with 300 MiB of requests.
      heartbeatIntervalMs: 600_000,
      server: (options) =>
        serveWebSocket({
          ...options,
          upgrade: async (request, protocols) => {
            const decision = await options.upgrade(request, protocols);
            if (!decision.accept) return decision;
            return {
              ...decision,
              onOpen: (transport) => {
                const counted = new CountedTransport(transport);
                transports.push(counted);
                counted.closed.then((info) => closes.set(counted, info));
                decision.onOpen(counted);
              },
            };
          },
        }),
    });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    reader?.close();
    await harness.close();
    await server.close();
  });

  /** What the harness's sockets hold unsent, all of them. */
  const unsent = () => transports.reduce((sum, t) => sum + (t.bufferedAmount ?? 0), 0);

  it("holds at most maxUnsentBytes for 50 executors that stop reading", async () => {
    // The executor that reads connects first: it is there all along.
    reader = await dialWebSocket(server.url, { protocols: OFFERED, maxFrameBytes: 1 << 24 });
    const answers: string[] = [];
    const waiters: ((frame: string) => void)[] = [];
    reader.listen((frame) => {
      const waiter = waiters.shift();
      if (waiter) waiter(frame);
      else answers.push(frame);
    });
    const ask = (message: unknown): Promise<any> => {
      reader.send(JSON.stringify(message));
      const next = answers.shift();
      return next !== undefined
        ? Promise.resolve(JSON.parse(next))
        : new Promise((resolve) => waiters.push((frame) => resolve(JSON.parse(frame))));
    };
    const registered = await ask({
      jsonrpc: "2.0",
      id: 1,
      method: "executor.register",
      params: registerParams({ environment_id: "", machine_id: "m_reader" }),
    });
    assert.ok(registered.result, JSON.stringify(registered));
    const readerEnd = transports[0];

    for (let i = 0; i < STALLED; i++) sockets.push(stalledExecutor(server.url, i));
    await until(() => transports.length === STALLED + 1);
    const stalled = transports.slice(1);
    // Every stalled executor's requests are in (and answered), or its connection was ended.
    await until(() => stalled.every((t) => closes.has(t) || t.received === ANSWERS + 1));

    const held = unsent();
    assert.ok(held <= BUDGET, `the harness holds ${held} bytes unsent, over ${BUDGET}`);
    const ended = stalled.filter((t) => closes.has(t));
    assert.ok(ended.length > 0, "the budget ended connections: it was needed");
    for (const t of ended) {
      // Ended at once (their close frame would wait behind what they do not read): 1011.
      assert.equal(closes.get(t)!.code, 1011);
    }

    // The executor that reads goes on: large answers one at a time, then a small one.
    const id = "r".repeat(ID_BYTES);
    for (let i = 0; i < 8; i++) {
      const beat = await ask({
        jsonrpc: "2.0",
        id: `${id}${i}`,
        method: "executor.heartbeat",
        params: {},
      });
      assert.equal(beat.result.drain, false);
    }
    assert.equal((await ask({ jsonrpc: "2.0", id: 2, method: "executor.heartbeat" })).id, 2);
    assert.equal(closes.has(readerEnd), false, "the reader's connection stays");
    assert.equal(harness.executor("exec_m_reader")?.connected, true);
    assert.ok(unsent() <= BUDGET, `${unsent()} bytes unsent`);
  });
});
