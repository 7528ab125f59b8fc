/**
 * The byte-stream WebSocket client (transport/websocket-stream.ts) as each runtime's preset dials
 * it — over `node:net` on Node and Deno, over `Bun.connect` on Bun — against a hand-written
 * server on node:net, for what the transport matrix does not reach: fragments, ping, a ping
 * flood from a server that reads nothing, invalid UTF-8, a masked server frame, a
 * client-initiated close, a frame written in pieces, and a refused handshake answer.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server, type Socket } from "node:net";
import type { Transport } from "../../mod.ts";
import { dialWebSocket } from "../helpers/dialers.ts";
import { RUNTIME } from "../helpers/runtime-command.ts";

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** One client frame, unmasked. */
interface ClientFrame {
  opcode: number;
  payload: Buffer;
}

function serverFrame(opcode: number, payload: Buffer | string, fin = true, mask = false): Buffer {
  const body = typeof payload === "string" ? Buffer.from(payload) : payload;
  const head = body.length < 126 ? 2 : body.length < 65536 ? 4 : 10;
  const out = Buffer.alloc(head + (mask ? 4 : 0) + body.length);
  out[0] = (fin ? 0x80 : 0) | opcode;
  if (body.length < 126) out[1] = body.length;
  else if (body.length < 65536) {
    out[1] = 126;
    out.writeUInt16BE(body.length, 2);
  } else {
    out[1] = 127;
    out.writeBigUInt64BE(BigInt(body.length), 2);
  }
  if (mask) out[1] |= 0x80; // masking bytes stay zero: the payload is unchanged
  body.copy(out, head + (mask ? 4 : 0));
  return out;
}

/** A server that answers the handshake, then lets the test drive the socket. */
async function rawServer(
  onOpen: (socket: Socket, frames: AsyncIterator<ClientFrame>) => Promise<void> | void,
  answer?: (key: string, protocols: string) => string,
): Promise<{ url: string; server: Server }> {
  const server = createServer((socket) => {
    let buffer = Buffer.alloc(0);
    let upgraded = false;
    const queue: ClientFrame[] = [];
    let wake: (() => void) | undefined;
    const frames: AsyncIterator<ClientFrame> = {
      async next() {
        while (queue.length === 0) await new Promise<void>((r) => (wake = r));
        return { value: queue.shift()!, done: false };
      },
    };
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!upgraded) {
        const end = buffer.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString();
        buffer = buffer.subarray(end + 4);
        const key = /sec-websocket-key: (.*)/i.exec(head)![1].trim();
        const protocols = /sec-websocket-protocol: (.*)/i.exec(head)?.[1].trim() ?? "";
        upgraded = true;
        if (answer) {
          socket.end(answer(key, protocols));
          return;
        }
        const accept = createHash("sha1").update(key + GUID).digest("base64");
        const chosen = protocols.split(",")[0].trim();
        socket.write(
          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
            `Sec-WebSocket-Accept: ${accept}\r\n` +
            (chosen ? `Sec-WebSocket-Protocol: ${chosen}\r\n` : "") + "\r\n",
        );
        void onOpen(socket, frames);
      }
      for (;;) {
        if (buffer.length < 2) return;
        let length = buffer[1] & 0x7f;
        let at = 2;
        if (length === 126) {
          if (buffer.length < 4) return;
          length = buffer.readUInt16BE(2);
          at = 4;
        } else if (length === 127) {
          if (buffer.length < 10) return;
          length = Number(buffer.readBigUInt64BE(2));
          at = 10;
        }
        if (buffer.length < at + 4 + length) return;
        const mask = buffer.subarray(at, at + 4);
        const payload = Buffer.from(buffer.subarray(at + 4, at + 4 + length));
        for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
        queue.push({ opcode: buffer[0] & 0x0f, payload });
        buffer = buffer.subarray(at + 4 + length);
        wake?.();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `ws://127.0.0.1:${port}/path?x=1`, server };
}

async function dial(url: string): Promise<Transport> {
  return await dialWebSocket(url, { protocols: ["bma.executor.v1.1", "bma.executor.v1"] });
}

const servers: Server[] = [];
after(() => {
  for (const server of servers) server.close();
});

describe(`byte-stream WebSocket client on ${RUNTIME}`, { timeout: 20_000 }, () => {
  it("negotiates, reassembles fragments, answers a ping, and sends in order", async () => {
    const got: string[] = [];
    let pong: ClientFrame | undefined;
    let sent: ClientFrame[] = [];
    const done = deferred<void>();
    const { url, server } = await rawServer(async (socket, frames) => {
      socket.write(serverFrame(1, "frag", false));
      socket.write(serverFrame(0, "ment", false));
      socket.write(serverFrame(0, "ed ✓", true));
      socket.write(serverFrame(9, "are you there"));
      pong = (await frames.next()).value;
      sent = [(await frames.next()).value, (await frames.next()).value];
      done.resolve();
    });
    servers.push(server);
    const transport = await dial(url);
    assert.equal(transport.protocol, "bma.executor.v1.1");
    transport.listen((frame) => {
      got.push(frame);
      transport.send("one");
      transport.send("two");
    });
    await done.promise;
    assert.deepEqual(got, ["fragmented ✓"]);
    assert.equal(pong?.opcode, 10, "a pong answers the ping");
    assert.equal(pong?.payload.toString(), "are you there");
    assert.deepEqual(sent.map((f) => f.payload.toString()), ["one", "two"]);
    transport.close(1000, "");
  });

  it("a server that pings and reads nothing cannot make it hold a pong per ping", async () => {
    const pings = 400_000;
    let flooding: Socket | undefined;
    const { url, server } = await rawServer((socket) => {
      flooding = socket;
      socket.pause(); // it reads nothing from here on
      const ping = serverFrame(9, Buffer.alloc(125, 0x70));
      const flood = Buffer.alloc(ping.length * pings);
      for (let i = 0; i < pings; i++) ping.copy(flood, i * ping.length);
      socket.write(flood);
      socket.write(serverFrame(1, "after the pings"));
    });
    servers.push(server);
    const transport = await dial(url);
    const got = deferred<string>();
    transport.listen((frame) => got.resolve(frame));
    assert.equal(await got.promise, "after the pings", "every ping before it was read");
    // Before, each ping's pong waited: 52 MB of pongs, less what the kernel buffers took.
    assert.ok(
      transport.bufferedAmount! < 2 * 1024 * 1024,
      `${transport.bufferedAmount} bytes wait unsent`,
    );
    // A paused socket never sees the other end go: it would hold the server (and Node) open.
    flooding!.destroy();
    transport.close(1000, "");
  });

  it("sends its close code and reason, and sees the server's answer", async () => {
    const closeSeen = deferred<ClientFrame>();
    const { url, server } = await rawServer(async (socket, frames) => {
      const frame = (await frames.next()).value;
      closeSeen.resolve(frame);
      socket.end(serverFrame(8, frame.payload));
    });
    servers.push(server);
    const transport = await dial(url);
    transport.close(4001, "token expired");
    const frame = await closeSeen.promise;
    assert.equal(frame.opcode, 8);
    assert.equal(frame.payload.readUInt16BE(0), 4001);
    assert.equal(frame.payload.subarray(2).toString(), "token expired");
    assert.deepEqual(await transport.closed, { code: 4001, reason: "token expired" });
    assert.throws(() => transport.send("late"), /closed/);
  });

  it("closes with 1007 on invalid UTF-8, 1002 on a masked frame or a bad close frame", async () => {
    const closeWith = (payload: number[]) => serverFrame(8, Buffer.from(payload));
    const cases: [Buffer, number][] = [
      [serverFrame(1, Buffer.from([0xc3, 0x28])), 1007],
      [serverFrame(1, "masked", true, true), 1002],
      // 1005 and 1006 never go on the wire; a one-byte close payload has no code.
      [closeWith([0x03, 0xed]), 1002],
      [closeWith([0x03]), 1002],
      // A close reason must be UTF-8 too.
      [closeWith([0x03, 0xe8, 0xc3, 0x28]), 1007],
    ];
    for (const [bad, code] of cases) {
      const closeSeen = deferred<ClientFrame>();
      const { url, server } = await rawServer(async (socket, frames) => {
        socket.write(bad);
        closeSeen.resolve((await frames.next()).value);
      });
      servers.push(server);
      const transport = await dial(url);
      transport.listen(() => assert.fail("nothing is delivered"));
      assert.equal((await transport.closed).code, code);
      const frame = await closeSeen.promise;
      assert.equal(frame.opcode, 8);
      assert.equal(frame.payload.readUInt16BE(0), code, "the client said why");
    }
  });

  it("reads a frame that arrives in pieces, and ends with 1006 when the socket drops", async () => {
    const got: string[] = [];
    const big = "x".repeat(200_000);
    const { url, server } = await rawServer(async (socket) => {
      const frame = serverFrame(1, big);
      for (let at = 0; at < frame.length; at += 7_000) {
        socket.write(frame.subarray(at, at + 7_000));
        await new Promise((r) => setTimeout(r, 1));
      }
      await new Promise((r) => setTimeout(r, 20));
      socket.destroy();
    });
    servers.push(server);
    const transport = await dial(url);
    transport.listen((frame) => got.push(frame));
    assert.equal((await transport.closed).code, 1006);
    assert.equal(got.length, 1);
    assert.equal(got[0].length, big.length);
  });

  it("refuses a handshake answer that is not a WebSocket one", async () => {
    const { url, server } = await rawServer(
      () => {},
      () =>
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: wrong\r\n\r\n",
    );
    servers.push(server);
    await assert.rejects(dial(url), (error: Error) => error.name === "DialError");
    const refused = await rawServer(
      () => {},
      () => "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
    );
    servers.push(refused.server);
    await assert.rejects(
      dial(refused.url),
      (error: Error & { status?: number }) => error.name === "DialError" && error.status === 403,
    );
  });
});
