/**
 * A web page open in the operator's browser cannot reach the harness: a browser sends `Origin`
 * on every WebSocket upgrade and POST, with its `User-Agent` and `Sec-Fetch-*` headers, which a
 * page cannot change; so a browser's request from another origin is refused (403) before
 * it could register as an executor (and be sent the operator's tool calls) or fill the artifact
 * store; and a harness that authenticates nobody (loopback, no tokens) also refuses a browser's
 * request that names it by a DNS name (421), which is what a page of its own origin does after
 * DNS rebinding. Executors and other clients that are no browser connect as before, whatever
 * `Origin` they send.
 * Raw HTTP on a real harness on 127.0.0.1, with the headers a browser sends.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect } from "node:net";
import { Harness, type HarnessServer } from "../../harness/node.ts";

/** What every browser sends with a WebSocket upgrade or a form's POST, and a page cannot change. */
const BROWSER = {
  "User-Agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0 Safari/537.36",
  "Sec-Fetch-Site": "cross-site",
  "Sec-Fetch-Mode": "websocket",
};

/** The status code of one raw HTTP/1.1 request (`head` holds its headers, CRLF each). */
function statusOf(port: number, head: string, body = ""): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let text = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => {
      text += chunk;
      const line = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (line) {
        socket.destroy();
        resolve(Number(line[1]));
      }
    });
    socket.once("error", reject);
    socket.once("close", () => reject(new Error(`closed without a status line: ${text}`)));
    socket.write(`${head}\r\n${body}`);
  });
}

/** A WebSocket upgrade to the connect endpoint, with `headers` (Host first). */
function upgrade(port: number, headers: Record<string, string>): Promise<number> {
  const lines = [
    "GET /v1/executors/connect HTTP/1.1",
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    "Connection: Upgrade",
    "Upgrade: websocket",
    "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    "Sec-WebSocket-Protocol: bma.executor.v1.1",
  ];
  return statusOf(port, lines.map((line) => `${line}\r\n`).join(""));
}

/** A `text/plain` artifact upload (what a cross-site form or a no-cors fetch can send). */
function upload(port: number, headers: Record<string, string>): Promise<number> {
  const body = "x".repeat(1024);
  const lines = [
    "POST /v1/executors/artifacts HTTP/1.1",
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    "Content-Type: text/plain",
    `Content-Length: ${body.length}`,
    "Connection: close",
  ];
  return statusOf(port, lines.map((line) => `${line}\r\n`).join(""), body);
}

describe("Harness: requests a browser sends for a web page", { timeout: 30_000 }, () => {
  let open: Harness;
  let openServer: HarnessServer;
  let guarded: Harness;
  let guardedServer: HarnessServer;
  let port: number;
  let guardedPort: number;

  before(async () => {
    open = new Harness({ insecureNoAuth: true });
    openServer = await open.serve({ hostname: "127.0.0.1", port: 0 });
    port = Number(new URL(openServer.httpUrl).port);
    guarded = new Harness({
      authenticate: (request) => {
        if (request.token !== "good-token") throw new Error("refused");
        return { scope: "environment", environmentId: "env_1" };
      },
    });
    guardedServer = await guarded.serve({ hostname: "127.0.0.1", port: 0 });
    guardedPort = Number(new URL(guardedServer.httpUrl).port);
  });
  after(async () => {
    await openServer.close();
    await open.close();
    await guardedServer.close();
    await guarded.close();
  });

  it("an upgrade from another origin's page is refused (403): it never becomes an executor", async () => {
    const host = `127.0.0.1:${port}`;
    assert.equal(
      await upgrade(port, { Host: host, Origin: "http://evil.example", ...BROWSER }),
      403,
    );
    assert.equal(await upgrade(port, { Host: host, Origin: "null", ...BROWSER }), 403);
    // An old browser without Sec-Fetch-* headers is still one by its User-Agent.
    assert.equal(
      await upgrade(port, {
        Host: host,
        Origin: `http://localhost:${port}`,
        "User-Agent": BROWSER["User-Agent"],
      }),
      403,
    );
    assert.equal(open.executors.length, 0);
  });

  it("after DNS rebinding (a page of its own origin, named by a DNS name): 421 without authentication", async () => {
    const host = `evil.example:${port}`;
    const sameSite = { ...BROWSER, "Sec-Fetch-Site": "same-origin" };
    assert.equal(await upgrade(port, { Host: host, Origin: `http://${host}`, ...sameSite }), 421);
    assert.equal(await upload(port, { Host: host, Origin: `http://${host}`, ...sameSite }), 421);
    assert.equal(open.executors.length, 0);
  });

  it("a cross-site form's upload is refused (403); an executor's upload is stored", async () => {
    const host = `127.0.0.1:${port}`;
    assert.equal(
      await upload(port, { Host: host, Origin: "https://evil.example", ...BROWSER }),
      403,
    );
    assert.equal(await upload(port, { Host: host }), 201);
  });

  it("executors connect as before: no Origin, or whatever Origin a client that is no browser sends", async () => {
    assert.equal(await upgrade(port, { Host: `127.0.0.1:${port}` }), 101);
    // A client library that sends an Origin of its own, through a proxy that rewrote the Host.
    assert.equal(
      await upgrade(port, {
        Host: `127.0.0.1:${port}`,
        Origin: "https://harness.example",
        "User-Agent": "Python/3.12 websocket-client/1.8",
      }),
      101,
    );
    assert.equal(
      await upgrade(port, { Host: `127.0.0.1:${port}`, Origin: `http://127.0.0.1:${port}` }),
      101,
    );
    assert.equal(await upgrade(port, { Host: `localhost:${port}` }), 101);
  });

  it("with authentication, a DNS name is the token's to decide; another origin is still refused", async () => {
    const host = `harness.example:${guardedPort}`;
    const token = { Authorization: "Bearer good-token" };
    const page = { ...BROWSER, "Sec-Fetch-Site": "same-origin" };
    assert.equal(
      await upgrade(guardedPort, { Host: host, Origin: `http://${host}`, ...page }),
      401,
    );
    assert.equal(
      await upgrade(guardedPort, { Host: host, Origin: `http://${host}`, ...page, ...token }),
      101,
    );
    assert.equal(
      await upgrade(guardedPort, {
        Host: host,
        Origin: "http://evil.example",
        ...BROWSER,
        ...token,
      }),
      403,
    );
  });
});
