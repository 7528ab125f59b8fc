/**
 * A server asked to listen on a Unix socket path: a socket left there by a server that died is
 * replaced, anything else (a regular file, a directory, a symbolic link) is left alone and the
 * server refuses to listen. On every server this runtime runs: `ws` (transport/node.ts)
 * everywhere, plus the runtime's own.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:net";
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Dialer, Transport, WebSocketServe } from "../../mod.ts";
import * as nodeWs from "../../transport/node.ts";
import * as denoWs from "../../transport/deno.ts";
import * as bunWs from "../../transport/bun.ts";
import { SocketPathTakenError } from "../../transport/stale-socket.node.ts";

const runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const servers: { name: string; serve: WebSocketServe; dial: Dialer }[] = [
  { name: "ws", serve: nodeWs.serveWebSocket, dial: nodeWs.dialWebSocket },
  ...(runtime === "deno"
    ? [{ name: "deno", serve: denoWs.serveWebSocket, dial: denoWs.dialWebSocket }]
    : []),
  ...(runtime === "bun"
    ? [{ name: "bun", serve: bunWs.serveWebSocket, dial: bunWs.dialWebSocket }]
    : []),
];

const PROTOCOL = "bma.executor.v1.1";
const dir = mkdtempSync(join(tmpdir(), "bma-stale-"));
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

/** A socket file no server listens on any more: the inode of a closed server's socket. */
async function staleSocket(path: string): Promise<void> {
  const live = `${path}.live`;
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(live, resolve));
  // A second name for the socket: closing the server removes the first, not this one.
  linkSync(live, path);
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(lstatSync(path).isSocket());
}

for (const { name, serve, dial } of servers) {
  describe(`serveWebSocket (${name}) on a Unix socket path`, { timeout: 30_000 }, () => {
    it("replaces a stale socket file and serves on it", async () => {
      const path = join(dir, `${name}-stale.sock`);
      await staleSocket(path);
      const server = await listen(serve, path);
      try {
        const transport = await dial(`unix://${path}`, { protocols: [PROTOCOL] });
        const echoed = new Promise<string>((resolve) => transport.listen(resolve));
        transport.send("hello");
        assert.equal(await echoed, "hello");
        transport.close();
        await transport.closed;
      } finally {
        await server.close();
      }
    });

    it("refuses a socket a server still listens on, which goes on serving", async () => {
      const path = join(dir, `${name}-live.sock`);
      const first = await listen(serve, path);
      try {
        await assert.rejects(listen(serve, path), (error: unknown) => {
          assert.ok(error instanceof SocketPathTakenError, String(error));
          assert.equal(error.occupant, "listening socket");
          assert.match(error.message, /a server is listening there/);
          return true;
        });
        const transport = await dial(`unix://${path}`, { protocols: [PROTOCOL] });
        const echoed = new Promise<string>((resolve) => transport.listen(resolve));
        transport.send("still here");
        assert.equal(await echoed, "still here");
        transport.close();
        await transport.closed;
      } finally {
        await first.close();
      }
    });

    it("refuses a regular file at the path and leaves it as it was", async () => {
      const path = join(dir, `${name}-victim.txt`);
      writeFileSync(path, "important\n");
      await assert.rejects(listen(serve, path), (error: unknown) => {
        assert.ok(error instanceof SocketPathTakenError, String(error));
        assert.equal(error.path, path);
        assert.equal(error.occupant, "regular file");
        assert.match(error.message, new RegExp(`cannot listen on ${path}: a regular file`));
        return true;
      });
      assert.equal(readFileSync(path, "utf8"), "important\n");
    });

    it("refuses a directory and a symbolic link, removing neither", async () => {
      const folder = join(dir, `${name}-folder`);
      mkdirSync(folder);
      writeFileSync(join(folder, "inside"), "kept");
      await assert.rejects(
        listen(serve, folder),
        (error) => error instanceof SocketPathTakenError && error.occupant === "directory",
      );
      assert.equal(readFileSync(join(folder, "inside"), "utf8"), "kept");

      const target = join(dir, `${name}-target.txt`);
      writeFileSync(target, "kept");
      const link = join(dir, `${name}-link.sock`);
      symlinkSync(target, link);
      await assert.rejects(
        listen(serve, link),
        (error) => error instanceof SocketPathTakenError && error.occupant === "symbolic link",
      );
      assert.ok(lstatSync(link).isSymbolicLink());
      assert.equal(readFileSync(target, "utf8"), "kept");
      assert.ok(existsSync(target));
    });
  });
}
