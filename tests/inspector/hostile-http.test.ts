/**
 * The HTTP servers (`serveInspector`, serving the inspector and the brain API) against hostile
 * and malformed requests, as a process of this runtime (`http-server.ts`) reached over raw TCP
 * on 127.0.0.1: bodies before login are refused without being read (memory measured), malformed
 * `Host` headers and request targets are answered 400, a `Host` the server does not serve 421,
 * an absolute-form request line is served (RFC 9112), and JSON nested deeper than the frame
 * limit is refused with 400. Never a 500, and the server serves the next request.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { request } from "node:http";
import { readFileSync } from "node:fs";
import { Lines } from "../cli/cli-helpers.ts";
import { spawnTs } from "../helpers/runtime-command.ts";

const MiB = 1024 * 1024;
const INSPECTOR_TOKEN = "inspector-token-0123456789abcdef";
const BRAIN_TOKEN = "brain-token-0123456789abcdef";

/** The resident memory of `pid`, in bytes. */
function rss(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "latin1"));
  return Number(match![1]) * 1024;
}

/** Sends `head` (and `bodyBytes` of body) on a raw connection; resolves with the status code. */
function rawRequest(port: number, head: string, bodyBytes = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port });
    let answer = "";
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (status) {
        resolve(Number(status[1]));
        socket.destroy();
      }
    });
    // A refusal may close the connection while the body is still being sent.
    socket.on("error", () => {});
    socket.on("close", () => reject(new Error(`no answer: ${JSON.stringify(answer)}`)));
    socket.write(head);
    if (bodyBytes > 0) {
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      let left = bodyBytes;
      const more = () => {
        while (left > 0 && !socket.destroyed) {
          const n = Math.min(left, chunk.length);
          left -= n;
          if (!socket.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
            socket.once("drain", more);
            return;
          }
        }
      };
      more();
    }
  });
}

/**
 * POSTs `totalBytes` of body with `Transfer-Encoding: chunked` (no `Content-Length`) from a real
 * HTTP client, writing while the server answers; resolves with the answer's status and body,
 * read whole (a connection reset before then rejects).
 */
function chunkedPost(
  url: string,
  headers: Record<string, string>,
  totalBytes: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: "POST", headers });
    let answered = false;
    req.on("response", (res) => {
      answered = true;
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (body += chunk));
      res.on("end", () => resolve({ status: res.statusCode!, body }));
      res.on("error", reject);
      res.on("aborted", () => reject(new Error(`the answer was cut: ${JSON.stringify(body)}`)));
    });
    // Once the answer is in, the server may close while the body is still being sent.
    req.on("error", (error) => {
      if (!answered) reject(error);
    });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let left = totalBytes;
    const more = () => {
      while (left > 0 && !answered && !req.destroyed) {
        left -= chunk.length;
        if (!req.write(chunk)) return void req.once("drain", more);
      }
      if (!req.destroyed) req.end();
    };
    more();
  });
}

/** JSON text nesting `depth` arrays. */
const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth);

describe("HTTP servers against hostile requests", {
  timeout: 120_000,
  skip: process.platform !== "linux" && "reads /proc",
}, () => {
  let child: ChildProcess;
  let inspectorPort: number;
  let brainUrl: string;
  let harnessBrainUrl: string;
  let sessionId: string;
  let stderr = "";

  before(async () => {
    child = spawnTs("tests/inspector/http-server.ts", [INSPECTOR_TOKEN, BRAIN_TOKEN], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stderr!.on("data", (chunk) => (stderr += chunk));
    const out = new Lines(child.stdout!, "http-server");
    inspectorPort = Number(new URL((await out.match(/^inspector (\S+)$/)).match[1]).port);
    brainUrl = (await out.match(/^brain (\S+)$/)).match[1];
    harnessBrainUrl = (await out.match(/^harness-brain (\S+)$/)).match[1];
    sessionId = (await out.match(/^session (\S+)$/)).match[1];
  });

  after(async () => {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    }
  });

  const get = (path: string, host = `127.0.0.1:${inspectorPort}`) =>
    rawRequest(inspectorPort, `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);

  it("refuses 24 unauthenticated 8 MiB bodies without reading them", async () => {
    const before = rss(child.pid!);
    const statuses = await Promise.all(Array.from({ length: 24 }, () =>
      rawRequest(
        inspectorPort,
        `POST /api/executors/x/sessions HTTP/1.1\r\nHost: 127.0.0.1:${inspectorPort}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${8 * MiB}\r\n\r\n`,
        8 * MiB,
      )));
    assert.deepEqual(new Set(statuses), new Set([401]));
    const grown = rss(child.pid!) - before;
    assert.ok(grown < 16 * MiB, `grew ${(grown / MiB).toFixed(1)} MiB`);
    assert.equal(await get("/api/state"), 401, "still serving");
  });

  it("answers a malformed Host or target 400, a Host it does not serve 421", async () => {
    assert.equal(await get("/api/state", "[::1"), 400);
    assert.equal(await get("/api/state", "a b c"), 400);
    assert.equal(await get("/api/state", "rebound.example"), 421);
    assert.equal(await get("/api/state", `rebound.example:${inspectorPort}`), 421);
    assert.equal(await get("*"), 400);
    assert.equal(await get("/api/state", `localhost:${inspectorPort}`), 401);
    assert.equal(await get("/api/state"), 401, "still serving");
  });

  it("serves an absolute-form request line (RFC 9112), its Host aside", async () => {
    const absolute = `GET http://127.0.0.1:${inspectorPort}/api/state HTTP/1.1\r\n` +
      `Host: elsewhere.example\r\nAuthorization: Bearer ${INSPECTOR_TOKEN}\r\n` +
      `Connection: close\r\n\r\n`;
    assert.equal(await rawRequest(inspectorPort, absolute), 200);
  });

  it("refuses JSON nested deeper than the frame limit with 400", async () => {
    const deep = `{"metadata": ${nested(50_000)}}`;
    const auth = { authorization: `Bearer ${BRAIN_TOKEN}`, "content-type": "application/json" };
    const listed = await (await fetch(`${brainUrl}/executors`, { headers: auth })).json();
    const executorId = listed.executors[0].executor_id;
    const inspectorAnswer = await fetch(
      `http://127.0.0.1:${inspectorPort}/api/executors/${executorId}/sessions`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${INSPECTOR_TOKEN}`, "content-type": "application/json" },
        body: deep,
      },
    );
    assert.equal(inspectorAnswer.status, 400, await inspectorAnswer.text());
    const assign = await fetch(`${brainUrl}/sessions`, {
      method: "POST",
      headers: auth,
      body: deep,
    });
    assert.equal(assign.status, 400, await assign.text());
    const assigned = await fetch(`${brainUrl}/sessions`, {
      method: "POST",
      headers: auth,
      body: JSON.stringify({ executor_id: executorId, session_id: "ses_hostile" }),
    });
    assert.equal(assigned.status, 201, await assigned.text());
    const call = await fetch(`${brainUrl}/sessions/ses_hostile/tool-calls`, {
      method: "POST",
      headers: auth,
      body: `{"tool": "bash", "input": {"command": ${nested(100_000)}}}`,
    });
    assert.equal(call.status, 400, await call.text());
    assert.doesNotMatch(stderr, /RangeError|Maximum call stack/);
    const state = await fetch(`${brainUrl}/executors`, { headers: auth });
    assert.equal(state.status, 200, "still serving");
    await state.text();
  });

  it("answers a chunked body past a bound with a readable 413 on every face, then serves on", async () => {
    const inspector = `http://127.0.0.1:${inspectorPort}`;
    const asInspector = { authorization: `Bearer ${INSPECTOR_TOKEN}` };
    const asBrain = { authorization: `Bearer ${BRAIN_TOKEN}`, "content-type": "application/json" };
    const cases: [string, string, Record<string, string>, number][] = [
      [
        "the inspector's JSON (1 MiB)",
        `${inspector}/api/sessions/${sessionId}/terminals`,
        { ...asInspector, "content-type": "application/json" },
        3 * MiB,
      ],
      [
        "the machine page's upload, past the server's 8 MiB",
        `${inspector}/api/sessions/${sessionId}/files/upload?path=big.bin`,
        { ...asInspector, "content-type": "application/octet-stream" },
        12 * MiB,
      ],
      ["the brain API (1 MiB)", `${brainUrl}/sessions`, asBrain, 3 * MiB],
      ["the brain API on the harness's server", `${harnessBrainUrl}/sessions`, asBrain, 3 * MiB],
    ];
    for (const [what, url, headers, bytes] of cases) {
      const answer = await chunkedPost(url, headers, bytes).catch((error) => {
        throw new Error(`${what}: ${error}`);
      });
      assert.equal(answer.status, 413, `${what}: ${answer.body}`);
      assert.equal(JSON.parse(answer.body).error.code, "payload_too_large", what);
    }
    assert.equal(await get("/api/state"), 401, "still serving");
    const state = await fetch(`${brainUrl}/executors`, { headers: asBrain });
    assert.equal(state.status, 200, "still serving");
    await state.text();
  });

  it("printed no warning (a listener per backpressure, an unhandled error)", () => {
    assert.doesNotMatch(stderr, /MaxListenersExceededWarning|Unhandled|Error/);
  });
});
