/**
 * HTTP over a Unix socket, as an executor that dialed `unix://` uploads its artifacts: a request
 * body is sent as it is read, never held whole (a spooled `bash` output may be a GiB), and a
 * request without a body is sent as one. A real `node:http` server on a socket under a temp dir.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fetchOverSocket } from "../../transport/http-socket.node.ts";
import { PEAK_MEMORY_SKIP, peakGrowth } from "../helpers/peak-memory.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-http-socket-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A server on a socket of its own that answers each request with the bytes its body held. */
async function countingServer(name: string): Promise<{ path: string; server: Server }> {
  const path = join(dir, `${name}.sock`);
  const server = createServer((request, response) => {
    let bytes = 0;
    request.on("data", (chunk: Uint8Array) => (bytes += chunk.byteLength));
    request.on("end", () => {
      response.writeHead(201, { "content-type": "application/json" });
      response.end(JSON.stringify({ bytes, method: request.method }));
    });
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return { path, server };
}

/** `chunks` chunks of 1 MiB, made as they are read. */
function generated(chunks: number): ReadableStream<Uint8Array> {
  let left = chunks;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (left-- === 0) controller.close();
      else controller.enqueue(new Uint8Array(1024 * 1024).fill(0x61));
    },
  });
}

describe("fetchOverSocket", { timeout: 60_000 }, () => {
  it("sends a body as it reads it: the peak memory grows by less than the body", {
    skip: PEAK_MEMORY_SKIP,
  }, async () => {
    const { path, server } = await countingServer("large");
    try {
      const chunks = 256;
      const request = new Request("http://localhost/v1/executors/artifacts", {
        method: "POST",
        body: generated(chunks),
        duplex: "half",
      } as RequestInit);
      const { value: response, grown } = await peakGrowth(() => fetchOverSocket(path, request));
      assert.equal(response.status, 201);
      assert.deepEqual(await response.json(), { bytes: chunks * 1024 * 1024, method: "POST" });
      // Before, the body was read whole first (and then copied).
      assert.ok(
        grown < chunks * 1024 * 1024,
        `the peak grew by ${(grown / 1048576).toFixed(0)} MiB for ${chunks} MiB sent`,
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("stops sending, and cancels the body, when the server answers without reading it", async () => {
    const path = join(dir, "early.sock");
    const server = createServer((_request, response) => {
      // As a 401, 404 or 503 before the body is read.
      response.writeHead(404, { "content-type": "application/json" });
      response.end('{"error":"not_found"}');
    });
    // The connection stays open after the answer (no keep-alive timeout to end it).
    server.keepAliveTimeout = 0;
    await new Promise<void>((resolve) => server.listen(path, resolve));
    try {
      const total = 64 * 1024 * 1024;
      let pulled = 0;
      let cancelled = false;
      const chunk = new Uint8Array(64 * 1024);
      const body = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulled >= total) return controller.close();
          pulled += chunk.byteLength;
          controller.enqueue(chunk);
        },
        cancel() {
          cancelled = true;
        },
      }, { highWaterMark: 0 });
      const response = await fetchOverSocket(
        path,
        new Request("http://localhost/v1/executors/artifacts", {
          method: "POST",
          body,
          duplex: "half",
        } as RequestInit),
      );
      assert.equal(response.status, 404);
      assert.deepEqual(await response.json(), { error: "not_found" });
      // Before, the sender waited for a drain that never came, the body pulled and held open.
      while (!cancelled) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(pulled < total, `${pulled} of ${total} bytes pulled`);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it("sends a small body whole, and a request without one", async () => {
    const { path, server } = await countingServer("small");
    try {
      const sent = await fetchOverSocket(
        path,
        new Request("http://localhost/x", { method: "POST", body: "hello" }),
      );
      assert.deepEqual(await sent.json(), { bytes: 5, method: "POST" });
      const none = await fetchOverSocket(path, new Request("http://localhost/x"));
      assert.deepEqual(await none.json(), { bytes: 0, method: "GET" });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
