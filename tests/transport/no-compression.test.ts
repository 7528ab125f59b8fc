/**
 * No dialer offers `permessage-deflate`, so none is negotiated even with a server that would take
 * it (workerd takes it; here a `ws` server on 127.0.0.1 configured to): the runtime's own dialer,
 * `ws` (which `wss://` and named pipes use) and, where the runtime has one, its global
 * `WebSocket` (Bun's `wss://` dialer). Each carries a frame both ways uncompressed.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type WebSocket as ServerSocket, WebSocketServer } from "ws";
import { EVERY_DIALER } from "../helpers/dialers.ts";

const PROTOCOL = "bma.executor.v1.1";

/** What the server saw of one connection. */
interface Seen {
  /** The request's `Sec-WebSocket-Extensions`, if any. */
  offered: string | undefined;
  /** The extensions the server agreed to ("" for none). */
  agreed: string;
  /** The first frame. */
  frame: string;
}

describe("WebSocket dialers offer no permessage-deflate", { timeout: 20_000 }, () => {
  let server: Server;
  let url: string;
  const seen: Seen[] = [];
  const waiting: ((seen: Seen) => void)[] = [];

  before(async () => {
    // A server that takes permessage-deflate whenever it is offered.
    const wss = new WebSocketServer({
      noServer: true,
      perMessageDeflate: { threshold: 0 },
      handleProtocols: (offered) => (offered.has(PROTOCOL) ? PROTOCOL : false),
    });
    server = createServer((_req, res) => res.writeHead(404).end());
    server.on("upgrade", (req: IncomingMessage, socket, head) => {
      wss.handleUpgrade(req, socket, head, (ws: ServerSocket) => {
        ws.once("message", (data) => {
          const entry: Seen = {
            offered: req.headers["sec-websocket-extensions"],
            agreed: ws.extensions,
            frame: String(data),
          };
          seen.push(entry);
          waiting.shift()?.(entry);
          ws.send(`echo ${String(data)}`);
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  for (const [name, dial] of EVERY_DIALER) {
    it(`${name}: no extension offered or agreed, frames carried both ways`, async () => {
      const arrived = new Promise<Seen>((resolve) => waiting.push(resolve));
      const transport = await dial(url, { protocols: [PROTOCOL] });
      try {
        assert.equal(transport.protocol, PROTOCOL);
        const answers: string[] = [];
        const answered = new Promise<void>((resolve) =>
          transport.listen((frame) => {
            answers.push(frame);
            resolve();
          })
        );
        const text = JSON.stringify({
          jsonrpc: "2.0",
          method: "x",
          params: { s: "a".repeat(500) },
        });
        transport.send(text);
        const entry = await arrived;
        assert.equal(entry.offered, undefined);
        assert.equal(entry.agreed, "");
        assert.equal(entry.frame, text);
        await answered;
        assert.deepEqual(answers, [`echo ${text}`]);
      } finally {
        transport.close(1000, "done");
        await transport.closed;
      }
    });
  }
});
