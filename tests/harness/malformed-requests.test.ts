/**
 * `harness.serve` and `serveUnix` on every server this runtime runs (the `ws` server, plus
 * Deno's or Bun's own) against requests that name no URL: a malformed `Host` header or request
 * target, as a plain request, a POST to the token endpoint, a scrape of `/metrics` and a
 * WebSocket upgrade. Each is answered 400 with the faces' error body (`{"error": {code,
 * message}}`), never a 500 or a crash, and the server answers the next request. Sent over raw
 * sockets: `fetch` will not send a malformed `Host`.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { WebSocketServe } from "../../mod.ts";
import { Harness, type HarnessServer } from "../../harness/mod.ts";
import * as nodeWs from "../../transport/node.ts";
import * as denoWs from "../../transport/deno.ts";
import * as bunWs from "../../transport/bun.ts";

const runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const servers: { name: string; serve: WebSocketServe }[] = [
  { name: "ws", serve: nodeWs.serveWebSocket },
  ...(runtime === "deno" ? [{ name: "deno", serve: denoWs.serveWebSocket }] : []),
  ...(runtime === "bun" ? [{ name: "bun", serve: bunWs.serveWebSocket }] : []),
];

const SECRET = "an-hs256-secret-of-at-least-32-bytes!";
const MALFORMED_HOSTS = ["[::1", "a b", "x:99999", "%", "a/b", "a?b", ""];
const UPGRADE_HEADERS =
  "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" +
  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: bma.executor.v1.1\r\n";

interface RawAnswer {
  status: number;
  body: string;
}

/**
 * Sends `head` on a raw connection to `where` and reads one answer: to its declared length, the
 * end of its chunks, or the connection's close (a refused upgrade is kept alive by some servers).
 */
function rawRequest(where: { port: number } | { path: string }, head: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = "port" in where
      ? connect({ host: "127.0.0.1", port: where.port })
      : connect({ path: where.path });
    let text = "";
    const complete = (closed: boolean): RawAnswer | undefined => {
      const split = text.indexOf("\r\n\r\n");
      if (split < 0) return undefined;
      const headers = text.slice(0, split).toLowerCase();
      const rest = text.slice(split + 4);
      const status = Number(/^http\/1\.1 (\d{3})/.exec(headers)?.[1]);
      const length = /^content-length: *(\d+)/m.exec(headers);
      if (length) {
        const body = Buffer.from(rest, "latin1").subarray(0, Number(length[1]));
        if (body.byteLength === Number(length[1])) return { status, body: body.toString() };
      } else if (/^transfer-encoding: *chunked/m.test(headers)) {
        if (/(^|\r\n)0\r\n\r\n$/.test(rest)) return { status, body: dechunk(rest) };
      } else if (closed || status === 101) return { status, body: rest };
      return undefined;
    };
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      const answer = complete(false);
      if (answer) {
        socket.destroy();
        resolve(answer);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => {
      const answer = complete(true);
      if (answer) resolve(answer);
      else reject(new Error(`no whole answer: ${JSON.stringify(text)}`));
    });
    socket.write(head);
  });
}

/** The body of a chunked transfer coding. */
function dechunk(text: string): string {
  let body = "";
  for (let at = 0;;) {
    const eol = text.indexOf("\r\n", at);
    const size = parseInt(text.slice(at, eol), 16);
    if (!size) return Buffer.from(body, "latin1").toString();
    body += text.slice(eol + 2, eol + 2 + size);
    at = eol + 2 + size + 2;
  }
}

function assertBadRequest(answer: RawAnswer, what: string): void {
  assert.equal(answer.status, 400, `${what}: ${JSON.stringify(answer)}`);
  const body = JSON.parse(answer.body) as { error: { code: string; message: string } };
  assert.equal(body.error.code, "bad_request", what);
  assert.match(body.error.message, /^malformed (Host header|request target)$/, what);
}

for (const { name, serve } of servers) {
  describe(`harness.serve on the ${name} server against requests that name no URL`, {
    timeout: 60_000,
  }, () => {
    let dir: string;
    let harness: Harness;
    const listening: { label: string; where: { port: number } | { path: string } }[] = [];
    const closing: HarnessServer[] = [];

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), "bma-malformed-"));
      harness = new Harness({
        server: serve,
        tokens: { secret: SECRET, credentials: [{ machineId: "m_1", machineToken: "mt_1" }] },
        metricsEndpoint: { authorize: () => false },
      });
      const tcp = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      // As `bma-harness serve` serves it: its own app in front of the harness's.
      const fronted = await harness.serve({
        hostname: "127.0.0.1",
        port: 0,
        fetch: (request) => harness.fetch(request),
      });
      const unixPath = join(dir, "h.sock");
      const unix = await harness.serveUnix(unixPath);
      closing.push(tcp, fronted, unix);
      listening.push(
        { label: "tcp", where: { port: Number(new URL(tcp.httpUrl).port) } },
        { label: "tcp with fetch", where: { port: Number(new URL(fronted.httpUrl).port) } },
        { label: "unix", where: { path: unixPath } },
      );
    });

    after(async () => {
      for (const server of closing) await server.close();
      await harness.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it("answers a malformed Host header 400 on every path, an upgrade included", async () => {
      for (const { label, where } of listening) {
        for (const host of MALFORMED_HOSTS) {
          const hostLine = `Host: ${host}\r\n`;
          const requests = [
            `GET /metrics HTTP/1.1\r\n${hostLine}Connection: close\r\n\r\n`,
            `POST /v1/machines/m_1/token HTTP/1.1\r\n${hostLine}Authorization: Bearer mt_1\r\n` +
            `Content-Length: 0\r\nConnection: close\r\n\r\n`,
            `GET /nowhere HTTP/1.1\r\n${hostLine}Connection: close\r\n\r\n`,
            `GET /v1/executors/connect HTTP/1.1\r\n${hostLine}${UPGRADE_HEADERS}\r\n`,
          ];
          for (const request of requests) {
            const what = `${label} ${JSON.stringify(host)} ${request.split("\r\n")[0]}`;
            assertBadRequest(await rawRequest(where, request), what);
          }
        }
      }
    });

    it("answers an absolute-form target that is no URL 400, and serves the next request", async () => {
      for (const { label, where } of listening) {
        for (const extra of ["Connection: close\r\n", UPGRADE_HEADERS]) {
          const answer = await rawRequest(
            where,
            `GET http://[::1/v1/executors/connect HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`,
          );
          // Bun's own server takes the Host header's authority instead: then a well-formed
          // request, which must not be answered 400.
          if (answer.status !== 400) {
            assert.equal(name, "bun", `${label}: ${JSON.stringify(answer)}`);
            assert.ok(answer.status < 500, `${label}: ${JSON.stringify(answer)}`);
          } else assertBadRequest(answer, `${label} ${extra}`);
        }
        const token = await rawRequest(
          where,
          "POST /v1/machines/m_1/token HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
            "Authorization: Bearer mt_1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        assert.equal(token.status, 200, `${label}: ${JSON.stringify(token)}`);
        assert.equal(typeof (JSON.parse(token.body) as { token: unknown }).token, "string");
      }
    });
  });
}
