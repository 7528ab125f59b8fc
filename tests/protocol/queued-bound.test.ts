/**
 * A peer that reads nothing cannot hold the sender's memory without bound: a `Peer` over a real
 * WebSocket to a server on 127.0.0.1 that stops reading after the handshake sends durable
 * requests (never dropped) until its transport holds more than `maxQueuedBytes` unsent; then it
 * closes the connection with 1011 (the peer reconnects and resumes), and every pending request
 * ends, rejected with that close code.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { WebSocketServer } from "ws";
import { ConnectionClosedError, dialWebSocket, Peer } from "../../node.ts";

const PROTOCOL = "bma.executor.v1.1";

describe("Peer: the unsent backlog is bounded", { timeout: 60_000 }, () => {
  it("closes with 1011 past maxQueuedBytes, and ends every pending request", async () => {
    const server = new WebSocketServer({
      host: "127.0.0.1",
      port: 0,
      handleProtocols: () => PROTOCOL,
    });
    await new Promise<void>((resolve) => server.once("listening", () => resolve()));
    // The server reads nothing once the connection is open.
    server.on(
      "connection",
      (ws) => (ws as unknown as { _socket: { pause(): void } })._socket.pause(),
    );
    const { port } = server.address() as { port: number };
    try {
      const transport = await dialWebSocket(`ws://127.0.0.1:${port}`, { protocols: [PROTOCOL] });
      const maxQueuedBytes = 4 * 1024 * 1024;
      const peer = new Peer(transport, { maxQueuedBytes, requestTimeoutMs: 0 });
      const text = "e".repeat(256 * 1024);
      const pending: Promise<unknown>[] = [];
      // 200 frames of 256 KiB: 50 MiB, far more than the kernel's buffers and the bound.
      const sends = 200;
      for (let sent = 0; sent < sends; sent++) {
        const call = peer.call("session.event", {
          session_id: "ses_slow",
          event: { type: "text", text },
        });
        pending.push(call.catch((error) => error));
        if (sent % 16 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      }
      // What is held for the peer stopped growing at the bound (the frame that crossed it, and
      // a close frame, on top): the sends after it were refused.
      const unsent = transport.bufferedAmount ?? 0;
      assert.ok(unsent <= maxQueuedBytes + 2 * text.length, `${unsent} bytes unsent`);
      // 1011 is sent; the close frame waits behind the backlog the peer never reads, so this
      // side may observe the connection dropped (1006) once its close wait is over.
      const closed = await transport.closed;
      assert.ok([1011, 1006].includes(closed.code), JSON.stringify(closed));
      const code = closed.code;
      const outcomes = await Promise.all(pending);
      assert.equal(outcomes.length, sends);
      for (const outcome of outcomes) {
        assert.ok(outcome instanceof ConnectionClosedError, String(outcome));
        assert.equal(outcome.code, code);
      }
    } finally {
      for (const client of server.clients) client.terminate();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
