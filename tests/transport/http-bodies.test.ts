/**
 * Request and response bodies on the harness's own server (`harness.serve`: `transport/node.ts`
 * on Node, Deno and Bun), as `bma-harness serve` serves it (the brain API beside the harness's
 * routes), reached over raw TCP on 127.0.0.1: a body is read only once the request is
 * authenticated (a 401 arrives while the client has sent part of a 20 MB body), a
 * `Content-Length` over 64 MiB is refused with 413 before any body, a body that stops arriving
 * fails and its connection closes, an event stream's first event arrives while the stream is
 * open, `TRACE` is answered 405 (there and by `serveInspector`), and the token endpoint takes
 * `{}` or no body, refusing anything else with 400; an artifact upload stops at its bound.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { Hono } from "hono";
import {
  bearerAuthorize,
  brainApi,
  ExecutorClient,
  Harness,
  type HarnessServer,
  serveInspector,
} from "../../node.ts";

const MiB = 1024 * 1024;
const BRAIN_TOKEN = "brain-token-0123456789abcdef";
const ENV_KEY = "ek_http_bodies_0123456789";
const SECRET = "an-hs256-secret-of-at-least-32-bytes!";
const INFO = { name: "http-bodies", os: "linux", arch: "amd64", version: "1.0.0" };
/** The server's handshake timeout, which also bounds a body's pauses: short for the test. */
const HANDSHAKE_MS = 500;
/** The generous bound of every wait for the server (a failure, not a timing). */
const BOUND_MS = 15_000;

/** `promise`, or a failure naming `what` once {@linkcode BOUND_MS} passed. */
function within<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not within ${BOUND_MS} ms: ${what}`)), BOUND_MS);
  });
  return Promise.race([promise, bound]).finally(() => clearTimeout(timer));
}

interface RawAnswer {
  status: number;
  headers: string;
  body: string;
}

/** A raw HTTP/1.1 exchange: what was written, the answer once whole, and the close. */
interface RawExchange {
  readonly socket: Socket;
  /** The first answer, read to its declared length. */
  readonly answer: Promise<RawAnswer>;
  /** Resolves once the server has closed the connection. */
  readonly closed: Promise<void>;
  /** Bytes of body written so far. */
  sent(): number;
}

/** Sends `head` and the first `bodyBytes` of a body (the rest never comes) to `port`. */
function exchange(port: number, head: string, bodyBytes = 0): RawExchange {
  const socket = connect({ host: "127.0.0.1", port });
  // The server may close while the body is still being written.
  socket.on("error", () => {});
  let text = "";
  let sent = 0;
  let resolveAnswer!: (answer: RawAnswer) => void;
  let rejectAnswer!: (error: Error) => void;
  const answer = new Promise<RawAnswer>((resolve, reject) => {
    resolveAnswer = resolve;
    rejectAnswer = reject;
  });
  answer.catch(() => {});
  socket.on("data", (chunk) => {
    text += chunk.toString("latin1");
    const split = text.indexOf("\r\n\r\n");
    if (split < 0) return;
    const headers = text.slice(0, split).toLowerCase();
    const length = Number(/^content-length: *(\d+)/m.exec(headers)?.[1] ?? 0);
    const body = text.slice(split + 4);
    if (body.length < length) return;
    const status = Number(/^http\/1\.1 (\d{3})/.exec(headers)?.[1]);
    resolveAnswer({ status, headers, body: body.slice(0, length) });
  });
  const closed = new Promise<void>((resolve) =>
    socket.on("close", () => {
      rejectAnswer(new Error(`closed before an answer: ${JSON.stringify(text)}`));
      resolve();
    })
  );
  socket.write(head);
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const more = () => {
    while (sent < bodyBytes && !socket.destroyed) {
      const n = Math.min(bodyBytes - sent, chunk.length);
      sent += n;
      if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
        socket.once("drain", more);
        return;
      }
    }
  };
  more();
  return { socket, answer, closed, sent: () => sent };
}

describe("the harness's own server: request and response bodies", { timeout: 90_000 }, () => {
  let harness: Harness;
  let server: HarnessServer;
  let port: number;
  let base: string;
  let client: ExecutorClient;

  before(async () => {
    harness = new Harness({
      handshakeTimeoutMs: HANDSHAKE_MS,
      maxArtifactBytes: 256 * 1024,
      tokens: {
        secret: SECRET,
        credentials: [{ environmentId: "env_1", environmentKey: ENV_KEY }],
      },
    });
    const brain = brainApi(harness, {
      authorize: bearerAuthorize(BRAIN_TOKEN),
      basePath: "/v1/harness",
    });
    // As `bma-harness serve` mounts it: the brain API beside the harness's own routes.
    const app = new Hono();
    app.all("/v1/harness/*", (c) => brain.fetch(c.req.raw));
    app.all("*", (c) => harness.fetch(c.req.raw));
    server = await harness.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
    base = server.httpUrl;
    port = Number(new URL(base).port);
    client = new ExecutorClient({
      baseUrl: base,
      environmentId: "env_1",
      environmentKey: ENV_KEY,
      executor: INFO,
    });
    await client.start();
    await harness.waitExecutor();
  });

  after(async () => {
    await client?.stop();
    await harness?.close();
    await server?.close();
  });

  const head = (method: string, path: string, headers: string[] = []) =>
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n${headers.join("\r\n")}${
      headers.length ? "\r\n" : ""
    }\r\n`;

  it("answers a client that ended its side after a whole request: the token endpoint, the brain API", async () => {
    const token = `{}`;
    const requests = [
      head("GET", "/v1/harness/executors", [`authorization: Bearer ${BRAIN_TOKEN}`]),
      head("POST", "/v1/environments/env_1/token", [
        `authorization: Bearer ${ENV_KEY}`,
        "content-type: application/json",
        `content-length: ${token.length}`,
      ]) + token,
    ];
    for (const request of requests) {
      const sent = exchange(port, request);
      // Its whole request written, the client half-closes (as `nc -N` does) and reads on.
      sent.socket.end();
      const answer = await within(sent.answer, `an answer to ${request.split("\r\n")[0]}`);
      assert.equal(answer.status, 200, `${request.split("\r\n")[0]}: ${answer.body}`);
      await within(sent.closed, "the connection closed after the answer");
    }
  });

  it("reads every header of a request, past the thousandth: none is dropped in silence", async () => {
    const filler = Array.from({ length: 1_000 }, (_, i) => `x-${i}: 1`);
    const sent = exchange(
      port,
      head("GET", "/v1/harness/executors", [...filler, `authorization: Bearer ${BRAIN_TOKEN}`]),
    );
    const answer = await within(sent.answer, "an answer");
    // Read whole (Node, Deno), or refused as too many (Bun: 431): never a 401 for a credential
    // that was sent.
    assert.ok(answer.status === 200 || answer.status === 431, `${answer.status} ${answer.body}`);
    sent.socket.destroy();
  });

  it("answers an unauthenticated 20 MB body 401 without reading it, then closes", async () => {
    const total = 20 * 1000 * 1000;
    const sent = MiB;
    const request = exchange(
      port,
      head("POST", "/v1/harness/sessions", [
        "Content-Type: application/json",
        `Content-Length: ${total}`,
      ]),
      sent,
    );
    // The client sends 1 MiB of it and waits: a server that read the body first never answers.
    const answer = await within(request.answer, "a 401 while the body is incomplete");
    assert.equal(answer.status, 401);
    assert.equal(request.sent(), sent);
    assert.match(answer.headers, /^connection: close$/m);
    assert.equal(JSON.parse(answer.body).error.code, "unauthorized");
    await within(request.closed, "the connection closes after the answer");
  });

  it("refuses a Content-Length over 64 MiB with 413 before any body", async () => {
    const request = exchange(
      port,
      head("POST", "/v1/harness/sessions", [
        `Authorization: Bearer ${BRAIN_TOKEN}`,
        "Content-Type: application/json",
        `Content-Length: ${64 * MiB + 1}`,
      ]),
    );
    const answer = await within(request.answer, "a 413 with no body sent");
    assert.equal(answer.status, 413);
    assert.equal(JSON.parse(answer.body).error.code, "payload_too_large");
    await within(request.closed, "the connection closes after the answer");
  });

  it("fails a body that stops arriving and closes its connection, read or not", async () => {
    // Read by the handler (authenticated): 10 of 100 bytes, then nothing.
    const read = exchange(
      port,
      head("POST", "/v1/harness/sessions", [
        `Authorization: Bearer ${BRAIN_TOKEN}`,
        "Content-Type: application/json",
        "Content-Length: 100",
      ]),
      10,
    );
    // Not read (unauthenticated): small and declared, or chunked.
    const small = exchange(
      port,
      head("POST", "/v1/harness/sessions", [
        "Content-Type: application/json",
        "Content-Length: 100",
      ]),
      10,
    );
    const chunked = exchange(
      port,
      head("POST", "/v1/harness/sessions", [
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
      ]) + 'a\r\n{"session_',
    );
    const stalled = await within(read.answer, "an answer to a stalled body");
    assert.equal(stalled.status, 408);
    assert.equal(JSON.parse(stalled.body).error.code, "request_timeout");
    assert.equal((await within(small.answer, "a 401")).status, 401);
    assert.equal((await within(chunked.answer, "a 401")).status, 401);
    await within(read.closed, "the stalled body's connection closes");
    await within(small.closed, "the small unread body's connection closes");
    await within(chunked.closed, "the chunked unread body's connection closes");
    // The server serves on.
    assert.equal((await fetch(`${base}/v1/harness/executors`)).status, 401);
  });

  it("streams the brain API's event stream: its first event arrives while the stream is open", async () => {
    const auth = { authorization: `Bearer ${BRAIN_TOKEN}`, "content-type": "application/json" };
    const assigned = await fetch(`${base}/v1/harness/sessions`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ session_id: "ses_stream" }),
    });
    assert.equal(assigned.status, 201, await assigned.text());
    const ready = await fetch(`${base}/v1/harness/sessions/ses_stream?until=ready&wait_ms=10000`, {
      headers: auth,
    });
    assert.equal((await ready.json()).state, "ready");
    await client.call("session.event", { session_id: "ses_stream", event: { type: "tick" } });
    const reading = new AbortController();
    const response = await within(
      fetch(`${base}/v1/harness/sessions/ses_stream/events`, {
        headers: { ...auth, accept: "text/event-stream" },
        signal: reading.signal,
      }),
      "the event stream's headers while it is open",
    );
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!/^id: \d+$/m.test(text)) {
      const chunk = await within(reader.read(), "the first event while the stream is open");
      assert.ok(!chunk.done, "the stream ended before its first event");
      text += chunk.value;
    }
    assert.doesNotMatch(text, /^event: end$/m, "the stream is still open");
    reading.abort();
    await reader.cancel().catch(() => {});
    const stopped = await fetch(`${base}/v1/harness/sessions/ses_stream/stop?wait_ms=10000`, {
      method: "POST",
      headers: auth,
      body: "{}",
    });
    await stopped.text();
  });

  it("answers TRACE 405, on this server and on serveInspector's, and serves on", async () => {
    // The same bridge serves the inspector and the brain API there.
    const inspectorServer = await serveInspector(() => Promise.resolve(new Response("ok")));
    try {
      for (const where of [port, Number(new URL(inspectorServer.url).port)]) {
        const request = exchange(
          where,
          `TRACE /healthz HTTP/1.1\r\nHost: 127.0.0.1:${where}\r\nConnection: close\r\n\r\n`,
        );
        const answer = await within(request.answer, `an answer to TRACE on ${where}`);
        assert.equal(answer.status, 405);
        assert.match(answer.headers, /^allow: /m);
        assert.equal(JSON.parse(answer.body).error.code, "method_not_allowed");
        request.socket.destroy();
      }
      assert.equal(await (await fetch(inspectorServer.url)).text(), "ok");
    } finally {
      await inspectorServer.close();
    }
    assert.equal((await fetch(`${base}/v1/harness/executors`)).status, 401);
  });

  it("takes `{}` or no body at the token endpoint, refuses any other with 400, bounded", async () => {
    const post = async (path: string, body: string | undefined, type = "application/json") => {
      const response = await fetch(`${base}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${ENV_KEY}`, "content-type": type },
        ...(body === undefined ? {} : { body }),
      });
      return { status: response.status, body: await response.json() };
    };
    for (const path of ["/v1/environments/env_1/token"]) {
      for (const body of ["{not json", "[1,2]", "hello", "7", "null"]) {
        const answer = await post(path, body, body === "hello" ? "text/plain" : undefined);
        assert.equal(answer.status, 400, `${path} ${body}`);
        assert.deepEqual(answer.body, { error: "bad_request" });
      }
      for (const body of ["{}", "", undefined, '{"note": 1}']) {
        const answer = await post(path, body);
        assert.equal(answer.status, 200, `${path} ${body}`);
        assert.equal(typeof answer.body.token, "string");
      }
      const large = await post(path, JSON.stringify({ pad: "x".repeat(8 * 1024) }));
      assert.equal(large.status, 413);
    }
    // The legacy alias names the environment in its body, read bounded.
    const legacy = await post("/v1/executors/token", JSON.stringify({ environment_id: "env_1" }));
    assert.equal(legacy.status, 200);
    for (const body of ["{not json", "[1,2]", "{}"]) {
      assert.equal((await post("/v1/executors/token", body)).status, 400, body);
    }
    const huge = await post(
      "/v1/executors/token",
      JSON.stringify({ environment_id: "env_1", pad: "x".repeat(MiB) }),
    );
    assert.equal(huge.status, 413);
    // A wrong credential is refused before the body is looked at.
    const refused = await fetch(`${base}/v1/environments/env_1/token`, {
      method: "POST",
      headers: { authorization: "Bearer ek_wrong_0123456789" },
      body: "{not json",
    });
    assert.equal(refused.status, 401);
    await refused.text();
  });

  it("holds at most four of the largest uploads at once: the next is sent on (503, retry-after)", async () => {
    const issued = await fetch(`${base}/v1/environments/env_1/token`, {
      method: "POST",
      headers: { authorization: `Bearer ${ENV_KEY}` },
    });
    const { token } = await issued.json();
    const upload = (length: number, sent: number) =>
      exchange(
        port,
        head("POST", "/v1/environments/env_1/artifacts", [
          `Authorization: Bearer ${token}`,
          "Content-Type: application/octet-stream",
          `Content-Length: ${length}`,
        ]),
        sent,
      );
    // Four of the largest (256 KiB each, this harness's maxArtifactBytes), their bodies on the way.
    const held = Array.from({ length: 4 }, () => upload(256 * 1024, 1024));
    // Once the four are being read (each reaches the handler after its token's check), another
    // is refused: asked until it is (an upload taken before that is a small one, stored).
    let refused = await within(upload(10, 10).answer, "an answer to the fifth");
    for (let i = 0; i < 100 && refused.status === 201; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      refused = await within(upload(10, 10).answer, "an answer to the fifth");
    }
    assert.equal(refused.status, 503);
    assert.match(refused.headers, /^retry-after: 1$/m);
    // Once they are gone, an upload is taken again.
    for (const one of held) one.socket.destroy();
    await Promise.all(held.map((one) => within(one.closed, "a held upload's end")));
    let status = 0;
    for (let i = 0; i < 50 && status !== 201; i++) {
      status = (await within(upload(10, 10).answer, "an upload's answer")).status;
      if (status !== 201) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(status, 201);
  });

  it("stops reading a chunked artifact upload at maxArtifactBytes: 413 while it is still sent", async () => {
    const issued = await fetch(`${base}/v1/environments/env_1/token`, {
      method: "POST",
      headers: { authorization: `Bearer ${ENV_KEY}` },
    });
    const { token } = await issued.json();
    // 512 KiB in chunks, then nothing: the answer comes at the bound, not at the body's end.
    const chunk = "x".repeat(64 * 1024);
    const chunks = Array.from({ length: 8 }, () => `${(64 * 1024).toString(16)}\r\n${chunk}\r\n`);
    const request = exchange(
      port,
      head("POST", "/v1/environments/env_1/artifacts", [
        `Authorization: Bearer ${token}`,
        "Content-Type: application/octet-stream",
        "Transfer-Encoding: chunked",
      ]) + chunks.join(""),
    );
    const answer = await within(request.answer, "a 413 at the bound");
    assert.equal(answer.status, 413);
    assert.deepEqual(JSON.parse(answer.body), { error: "too_large" });
    await within(request.closed, "the connection closes after the answer");
  });
});
