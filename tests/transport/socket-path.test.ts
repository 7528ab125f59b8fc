/**
 * A Unix socket path longer than the system's `sun_path` takes is refused up front, by every
 * server this runtime runs (`ws` everywhere, plus the runtime's own) and every dialer: the system
 * would cut it short, bind a file nobody reports or removes, and fail the next start. A relative
 * path is reported as an absolute `unix://` URL.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import process from "node:process";
import {
  type Dialer,
  DialError,
  type Transport,
  UnsupportedUrlError,
  type WebSocketServe,
} from "../../mod.ts";
import * as nodeWs from "../../transport/node.ts";
import * as denoWs from "../../transport/deno.ts";
import * as bunWs from "../../transport/bun.ts";
import { maxSocketPathBytes, SocketPathTooLongError } from "../../transport/socket-path.node.ts";

const RUNTIME = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const servers: { name: string; serve: WebSocketServe; dial: Dialer }[] = [
  { name: "ws", serve: nodeWs.serveWebSocket, dial: nodeWs.dialWebSocket },
  ...(RUNTIME === "deno"
    ? [{ name: "deno", serve: denoWs.serveWebSocket, dial: denoWs.dialWebSocket }]
    : []),
  ...(RUNTIME === "bun"
    ? [{ name: "bun", serve: bunWs.serveWebSocket, dial: bunWs.dialWebSocket }]
    : []),
];

const PROTOCOL = "bma.executor.v1.1";
const dir = mkdtempSync(join(tmpdir(), "bma-sockpath-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function listen(serve: WebSocketServe, path: string) {
  return serve({
    path,
    upgrade: () =>
      Promise.resolve({
        accept: true,
        protocol: PROTOCOL,
        onOpen: (transport: Transport) => transport.listen((frame) => transport.send(frame)),
      }),
  });
}

/** A path in a folder of its own, `bytes` long. */
function pathOf(name: string, bytes: number): { folder: string; path: string } {
  const folder = join(dir, name);
  mkdirSync(folder);
  const stem = join(folder, "s");
  return { folder, path: stem + "a".repeat(bytes - stem.length - 5) + ".sock" };
}

describe("maxSocketPathBytes", () => {
  it("is sun_path less its NUL: 107 on Linux, 103 on macOS and the BSDs", () => {
    assert.equal(maxSocketPathBytes("linux"), 107);
    assert.equal(maxSocketPathBytes("darwin"), 103);
    assert.equal(maxSocketPathBytes("freebsd"), 103);
  });
});

for (const { name, serve, dial } of servers) {
  describe(
    `serveWebSocket (${name}) and its dialer on a Unix socket path`,
    { timeout: 30_000 },
    () => {
      const limit = maxSocketPathBytes();

      it("refuses a path over the limit by name, and binds nothing", async () => {
        const { folder, path } = pathOf(`${name}-long`, limit + 1);
        const error = await listen(serve, path).then(
          (server) => server.close().then(() => assert.fail("listened")),
          (error: unknown) => error,
        );
        assert.ok(error instanceof SocketPathTooLongError, String(error));
        assert.equal(error.path, path);
        assert.equal(error.limit, limit);
        assert.equal(error.bytes, limit + 1);
        assert.equal(error.code, "ENAMETOOLONG");
        assert.match(
          error.message,
          new RegExp(`^cannot listen on ${path}: .*at most ${limit} bytes`),
        );
        assert.deepEqual(readdirSync(folder), [], "nothing bound, the cut path neither");
      });

      it("serves a path of exactly the limit", async () => {
        const { path } = pathOf(`${name}-fits`, limit);
        const server = await listen(serve, path);
        try {
          const transport = await dial(server.url, { protocols: [PROTOCOL] });
          transport.close();
          await transport.closed;
        } finally {
          await server.close();
        }
      });

      it("refuses to dial a path over the limit: a DialError caused by SocketPathTooLongError", async () => {
        const { path } = pathOf(`${name}-dial`, limit + 20);
        const error = await dial(`unix://${path}`, { protocols: [PROTOCOL] }).then(
          () => assert.fail("dialed"),
          (error: unknown) => error,
        );
        assert.ok(error instanceof DialError, String(error));
        assert.ok(error.cause instanceof SocketPathTooLongError);
        assert.match(error.message, new RegExp(`^cannot connect to ${path}: `));
      });

      it("reports a relative path as an absolute unix:// URL, which dials it", async () => {
        const folder = join(dir, `${name}-rel`);
        mkdirSync(folder);
        const cwd = process.cwd();
        process.chdir(dir);
        let server;
        try {
          server = await listen(serve, `${name}-rel/r.sock`);
        } finally {
          process.chdir(cwd);
        }
        try {
          assert.equal(server.url, `unix://${resolve(folder, "r.sock")}`);
          const transport = await dial(server.url, { protocols: [PROTOCOL] });
          transport.close();
          await transport.closed;
        } finally {
          await server.close();
        }
      });

      it("refuses a short relative path whose absolute form, the URL it reports, is over the limit", async () => {
        // The URL names the absolute path, which no client could dial: refused before binding.
        const folder = join(dir, `${name}-relong-${"d".repeat(limit)}`);
        mkdirSync(folder);
        const cwd = process.cwd();
        process.chdir(folder);
        let error: unknown;
        try {
          error = await listen(serve, "r.sock").then(
            (server) => server.close().then(() => assert.fail(`listened at ${server.url}`)),
            (error: unknown) => error,
          );
        } finally {
          process.chdir(cwd);
        }
        assert.ok(error instanceof SocketPathTooLongError, String(error));
        assert.equal(error.path, "r.sock");
        assert.ok(error.bytes > limit, String(error.bytes));
        assert.match(error.message, new RegExp(`^cannot listen on r\\.sock: its absolute path `));
        assert.deepEqual(readdirSync(folder), [], "nothing bound");
      });
    },
  );
}

describe(
  `an ExecutorClient told a socket path over the limit (${RUNTIME})`,
  { timeout: 30_000 },
  () => {
    it("stops at once (reason config), instead of dialing it for good", async () => {
      const sdk: typeof import("../../node.ts") = await import(`../../${RUNTIME}.ts`);
      const { path } = pathOf("client-dial", maxSocketPathBytes() + 20);
      const client = new sdk.ExecutorClient({
        harnessUrl: `unix://${path}`,
        executor: { name: "long-path", os: "linux", arch: "x64", version: "0.0.1" },
        reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
      });
      await assert.rejects(client.start());
      const closed = await client.closed;
      assert.equal(closed.reason, "config");
      assert.ok(closed.error instanceof DialError, String(closed.error));
      assert.ok(closed.error.cause instanceof SocketPathTooLongError);
    });
  },
);

describe(
  `an ExecutorClient told a URL no dialer opens (${RUNTIME})`,
  { timeout: 30_000 },
  () => {
    for (const url of ["not a url", "ftp://127.0.0.1/harness", "file:///tmp/harness"]) {
      it(`stops at once (reason config) for ${url}, instead of dialing it for good`, async () => {
        const sdk: typeof import("../../node.ts") = await import(`../../${RUNTIME}.ts`);
        const client = new sdk.ExecutorClient({
          harnessUrl: url,
          executor: { name: "bad-url", os: "linux", arch: "x64", version: "0.0.1" },
          reconnect: { initialDelayMs: 1, maxDelayMs: 5 },
        });
        await assert.rejects(client.start(), DialError);
        const closed = await client.closed;
        assert.equal(closed.reason, "config");
        assert.ok(closed.error instanceof DialError, String(closed.error));
        assert.ok(closed.error.cause instanceof UnsupportedUrlError, String(closed.error.cause));
      });
    }
  },
);
