/**
 * A close this end starts does not wait on a peer that never answers it: with raw sockets
 * (node:net) on 127.0.0.1 and Unix sockets under a temp dir, playing a peer that takes the close
 * frame and sends nothing back. The harness's server drops such a connection (it closed it for
 * not registering) and frees its slot among the connections not registered; a client's
 * `close()` settles. Before, `ws` held both for 30 s, and Deno.serve for as long as the peer
 * stayed.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, createServer, type Server, type Socket } from "node:net";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Harness } from "../../harness/node.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { OFFERED } from "../helpers/executor-peer.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const preset = await import(`../../harness/${RUNTIME}.ts`) as { Harness: typeof Harness };

const KEY = "dGhlIHNhbXBsZSBub25jZQ==";
const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Where = { port: number; host: string } | { path: string };

/** What a raw client saw: the close frame's code, and the server's end of the socket. */
interface Watched {
  closeCode: Promise<number>;
  ended: Promise<void>;
}

/** A raw socket that upgrades, then reads and never answers anything (a close frame included). */
function silentClient(where: Where): Promise<Socket & Watched> {
  return new Promise((resolve, reject) => {
    const socket = connect(where as { port: number; host: string }, () => {
      socket.write(
        "GET /v1/executors/connect HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n" +
          `Connection: Upgrade\r\nSec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n` +
          `Sec-WebSocket-Protocol: ${OFFERED[0]}\r\n\r\n`,
      );
      resolve(Object.assign(socket, { closeCode, ended }));
    });
    socket.once("error", reject);
    let received = Buffer.alloc(0);
    let gotCloseCode!: (code: number) => void;
    const closeCode = new Promise<number>((r) => (gotCloseCode = r));
    const ended = new Promise<void>((r) => socket.once("close", () => r()));
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const head = received.indexOf("\r\n\r\n");
      if (head < 0) return;
      const frame = received.subarray(head + 4);
      // A server frame is unmasked; a close frame (opcode 8) starts with its 2-byte code.
      if (frame.length >= 4 && (frame[0] & 0x0f) === 8) gotCloseCode(frame.readUInt16BE(2));
    });
  });
}

async function start(
  HarnessClass: typeof Harness,
  unix: boolean,
): Promise<{ url: string; where: Where }> {
  const harness = new HarnessClass({
    insecureNoAuth: true,
    registerTimeoutMs: 200,
    handshakeTimeoutMs: 300,
    maxUnregisteredConnections: 1,
  });
  cleanups.push(() => harness.close());
  if (unix) {
    const dir = mkdtempSync(join(tmpdir(), "bma-close-wait-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, "harness.sock");
    const server = await harness.serveUnix(path);
    cleanups.push(() => server.close());
    return { url: server.url, where: { path } };
  }
  const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  cleanups.push(() => server.close());
  return {
    url: server.url,
    where: { host: "127.0.0.1", port: Number(new URL(server.httpUrl).port) },
  };
}

/**
 * Deno's preset serves Unix sockets with `Deno.serve`, whose WebSocket waits for the peer's
 * close frame without end and has no way to drop the socket (`transport/websocket.ts`).
 */
function keepsSilentSockets(name: string, unix: boolean): boolean {
  return name === "harness/deno.ts" && unix;
}

/**
 * `promise`, or a failure naming `what` after `ms` (well over the 2 s a close waits, well under
 * `ws`'s 30 s; not every runner enforces a `describe`'s timeout).
 */
async function within<T>(promise: Promise<T>, what: string, ms = 10_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  while (!(await condition())) await new Promise((r) => setTimeout(r, 50));
}

const SERVERS: [string, typeof Harness][] = RUNTIME === "node"
  ? [["node:http", Harness]]
  : [["node:http", Harness], [`harness/${RUNTIME}.ts`, preset.Harness]];
for (const [name, HarnessClass] of SERVERS) {
  for (const unix of [false, true]) {
    const over = unix ? "a Unix socket" : "TCP";
    describe(`${name} over ${over}: a peer that never answers the close`, {
      timeout: 20_000,
    }, () => {
      it("is dropped, and its slot among the connections not registered is free again", async () => {
        const { url, where } = await start(HarnessClass, unix);
        const silent = await silentClient(where);
        cleanups.push(() => silent.destroy());
        // Closed for not registering (1008), and the cap of 1 is taken while it lasts.
        assert.equal(await silent.closeCode, 1008);
        if (keepsSilentSockets(name, unix)) {
          // Deno.serve cannot drop it, but the harness counts it no more once its close has
          // waited 2 s: another executor may connect.
          await within(
            waitFor(async () => {
              const probe = await dialWebSocket(url, { protocols: OFFERED }).catch(() => undefined);
              probe?.close();
              return probe !== undefined;
            }),
            "a slot for another executor",
          );
        } else {
          // Dropped by the server without an answer from this end (bounded by the test's 20 s,
          // where `ws` alone waited 30 s).
          await within(silent.ended, "the server dropping the silent peer");
        }
        const next = await dialWebSocket(url, { protocols: OFFERED });
        cleanups.push(() => next.close());
        assert.equal(next.protocol, OFFERED[0]);
      });
    });
  }
}

describe("dialWebSocket: a server that never answers the close", { timeout: 20_000 }, () => {
  it("close() settles, and the socket is gone", async () => {
    let accepted!: (socket: Socket) => void;
    const serverSide = new Promise<Socket>((r) => (accepted = r));
    const server: Server = createServer((socket) => {
      socket.once("data", (request: Buffer) => {
        const key = /sec-websocket-key: *(\S+)/i.exec(request.toString("latin1"))?.[1] ?? "";
        const accept = createHash("sha1").update(key + GUID).digest("base64");
        socket.write(
          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
            `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: ${OFFERED[0]}\r\n\r\n`,
        );
        accepted(socket);
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    cleanups.push(() => new Promise((r) => server.close(r)));
    const port = (server.address() as { port: number }).port;
    const transport = await dialWebSocket(`ws://127.0.0.1:${port}`, { protocols: OFFERED });
    const socket = await serverSide;
    cleanups.push(() => socket.destroy());
    const gone = new Promise<void>((r) => socket.once("close", () => r()));
    transport.close(1000, "done");
    // Either the close frame's code (the server never answered) or 1006: settled, not hung.
    const info = await within(transport.closed, "close() settling");
    assert.ok(info.code === 1000 || info.code === 1006, `closed with ${info.code}`);
    await within(gone, "the client dropping its socket");
  });
});
