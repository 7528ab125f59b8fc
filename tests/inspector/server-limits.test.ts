/**
 * `serveInspector`'s connections are bounded as the harness's are: one that does not send its
 * first request's headers within `handshakeTimeoutMs` is closed (bytes trickling in do not extend
 * it), and beyond `maxConnections` a new connection is closed as it arrives, so silent clients
 * cannot hold the process's file descriptors. A real server on 127.0.0.1, raw TCP clients.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { type InspectorServer, serveInspector } from "../../http/inspector/serve.node.ts";

const answer = () => Promise.resolve(new Response("ok"));

/** A raw connection to `url`'s port, once connected. */
function opened(url: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(new URL(url).port), "127.0.0.1", () => resolve(socket));
    socket.once("error", reject);
  });
}

/** Resolves when the server has closed `socket`, with what it sent before. */
function closedByServer(socket: Socket): Promise<string> {
  let received = "";
  socket.on("data", (chunk) => (received += chunk.toString("latin1")));
  socket.on("error", () => {});
  return new Promise((resolve) => socket.once("close", () => resolve(received)));
}

describe("serveInspector: connections are bounded", { timeout: 30_000 }, () => {
  const servers: InspectorServer[] = [];
  const sockets: Socket[] = [];
  after(async () => {
    for (const socket of sockets) socket.destroy();
    for (const server of servers) await server.close();
  });

  it("a connection that sends no complete request in time is closed, trickling or silent", async () => {
    const server = await serveInspector(answer, { handshakeTimeoutMs: 300 });
    servers.push(server);
    const silent = await opened(server.url);
    const trickling = await opened(server.url);
    sockets.push(silent, trickling);
    const silentEnd = closedByServer(silent);
    const tricklingEnd = closedByServer(trickling);
    trickling.write("GET / HTTP/1.1\r\n");
    const timer = setInterval(() => trickling.write("x-a: b\r\n"), 50);
    try {
      assert.equal(await silentEnd, "");
      assert.equal(await tricklingEnd, "");
    } finally {
      clearInterval(timer);
    }
  });

  it("beyond maxConnections a new connection is closed at once; those held are served", async () => {
    const server = await serveInspector(answer, { maxConnections: 3, handshakeTimeoutMs: 60_000 });
    servers.push(server);
    const held: Socket[] = [];
    for (let i = 0; i < 3; i++) {
      const socket = await opened(server.url);
      sockets.push(socket);
      held.push(socket);
      // Answered: the server has taken the connection (and keeps it alive).
      const first = new Promise<string>((resolve) =>
        socket.once("data", (c) => resolve(String(c)))
      );
      socket.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      assert.match(await first, /^HTTP\/1\.1 200/);
    }
    const extra = await opened(server.url);
    sockets.push(extra);
    const ended = closedByServer(extra);
    extra.write("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert.equal(await ended, "", "closed without an answer");
    held[0].destroy();
  });
});
