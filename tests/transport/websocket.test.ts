/** The WebSocket transport over real sockets: TCP on 127.0.0.1 and a Unix socket in a temp dir. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Dialer, DialError, Peer, type Transport, type WebSocketServe } from "../../mod.ts";
import * as nodeWs from "../../transport/node.ts";
import * as denoWs from "../../transport/deno.ts";
import * as bunWs from "../../transport/bun.ts";
import type { RunningServer } from "../../transport/server.ts";

/** The adapters this runtime can run: `ws` everywhere, plus the runtime's own. */
const runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const adapters: { name: string; serve: WebSocketServe; dial: Dialer }[] = [
  { name: "ws", serve: nodeWs.serveWebSocket, dial: nodeWs.dialWebSocket },
  ...(runtime === "deno"
    ? [{ name: "deno", serve: denoWs.serveWebSocket, dial: denoWs.dialWebSocket }]
    : []),
  ...(runtime === "bun"
    ? [{ name: "bun", serve: bunWs.serveWebSocket, dial: bunWs.dialWebSocket }]
    : []),
];

const PROTOCOLS = ["bma.executor.v1.1", "bma.executor.v1"];

/** A server that echoes frames, closes on command, and refuses upgrades without a token. */
async function echoServer(
  serveWebSocket: WebSocketServe,
  where: { path?: string },
  maxFrameBytes?: number,
): Promise<{
  server: RunningServer;
  accepted: Transport[];
}> {
  const accepted: Transport[] = [];
  const server = await serveWebSocket({
    ...where,
    maxFrameBytes,
    upgrade: (request, offered) => {
      if (request.headers.get("authorization") !== "Bearer good") {
        return Promise.resolve({ accept: false, response: new Response("no", { status: 401 }) });
      }
      const protocol = PROTOCOLS.find((p) => offered.includes(p));
      if (!protocol) {
        return Promise.resolve({
          accept: false,
          response: new Response("no protocol", { status: 400 }),
        });
      }
      return Promise.resolve({
        accept: true,
        protocol,
        onOpen: (transport: Transport) => {
          accepted.push(transport);
          transport.listen((frame) => {
            const close = /^close (\d+) (.*)$/.exec(frame);
            const later = /^later (\d+) then close (\d+)$/.exec(frame);
            const sized = /^bytes (\d+)$/.exec(frame);
            if (close) transport.close(Number(close[1]), close[2]);
            else if (sized) transport.send(textOfBytes(Number(sized[1])));
            else if (later) {
              // Sent from a task of their own, not the socket's handler, then closed at once.
              setTimeout(() => {
                for (let i = 0; i < Number(later[1]); i++) transport.send(`later:${i}`);
                transport.close(Number(later[2]), "after the frames");
              }, 0);
            } else transport.send(`echo:${frame}`);
          });
        },
      });
    },
    fetch: (request) => Promise.resolve(new Response(`http ${new URL(request.url).pathname}`)),
  });
  return { server, accepted };
}

/** A text of `n` UTF-8 bytes, mostly three-byte characters. */
function textOfBytes(n: number): string {
  return "☃".repeat(Math.floor(n / 3)) + "a".repeat(n % 3);
}

function nextFrame(transport: Transport): () => Promise<string> {
  const queue: string[] = [];
  const waiters: ((f: string) => void)[] = [];
  transport.listen((frame) => {
    const waiter = waiters.shift();
    if (waiter) waiter(frame);
    else queue.push(frame);
  });
  return () => queue.length ? Promise.resolve(queue.shift()!) : new Promise((r) => waiters.push(r));
}

const auth = { authorization: "Bearer good" };

for (const kind of ["tcp", "unix"] as const) {
  for (const server of adapters) {
    for (const client of adapters) {
      const dialWebSocket = client.dial;
      describe(`WebSocket transport over ${kind}: ${client.name} client, ${server.name} server`, {
        timeout: 20_000,
      }, () => {
        let dir: string;
        let running: RunningServer;
        let accepted: Transport[];
        before(async () => {
          dir = mkdtempSync(join(tmpdir(), "bma-ws-"));
          ({ server: running, accepted } = await echoServer(
            server.serve,
            kind === "unix" ? { path: join(dir, "h.sock") } : {},
            4096,
          ));
        });
        after(async () => {
          await running.close();
          rmSync(dir, { recursive: true, force: true });
        });

        it("negotiates the preferred subprotocol and carries frames both ways", async () => {
          const transport = await dialWebSocket(running.url, {
            protocols: PROTOCOLS,
            headers: auth,
          });
          assert.equal(transport.protocol, "bma.executor.v1.1");
          const next = nextFrame(transport);
          transport.send("héllo ☃");
          assert.equal(await next(), "echo:héllo ☃");
          transport.close(1000, "done");
          assert.equal((await transport.closed).code, 1000);
        });

        it("carries the server's frames of every length class whole", async () => {
          const transport = await dialWebSocket(running.url, {
            protocols: PROTOCOLS,
            headers: auth,
          });
          const next = nextFrame(transport);
          for (const bytes of [0, 1, 125, 126, 127, 65_535, 65_536, 200_000]) {
            transport.send(`bytes ${bytes}`);
            const frame = await next();
            assert.equal(new TextEncoder().encode(frame).length, bytes);
            assert.ok(frame === textOfBytes(bytes), `the frame of ${bytes} bytes differs`);
          }
          transport.close(1000, "done");
          assert.equal((await transport.closed).code, 1000);
        });

        it("accepts bma.executor.v1 when only it is offered", async () => {
          const transport = await dialWebSocket(running.url, {
            protocols: ["bma.executor.v1"],
            headers: auth,
          });
          assert.equal(transport.protocol, "bma.executor.v1");
          transport.close();
          await transport.closed;
        });

        it("refuses the upgrade with the server's HTTP status: no socket", async () => {
          const before = accepted.length;
          const noToken = await dialWebSocket(running.url, { protocols: PROTOCOLS }).catch((e) =>
            e
          );
          assert.ok(noToken instanceof DialError);
          assert.equal(noToken.status, 401);
          const noProtocol = await dialWebSocket(running.url, {
            protocols: ["other"],
            headers: auth,
          })
            .catch((e) => e);
          assert.equal(noProtocol.status, 400);
          assert.equal(accepted.length, before);
        });

        for (const code of [4001, 4002, 4003, 4004, 4005, 1008, 1001]) {
          it(`delivers close code ${code} and its reason from the server`, async () => {
            const transport = await dialWebSocket(running.url, {
              protocols: PROTOCOLS,
              headers: auth,
            });
            transport.listen(() => {});
            transport.send(`close ${code} reason ${code}`);
            assert.deepEqual(await transport.closed, { code, reason: `reason ${code}` });
          });
        }

        it("delivers frames sent from another task in order, before a close that follows them", async () => {
          const transport = await dialWebSocket(running.url, {
            protocols: PROTOCOLS,
            headers: auth,
          });
          const frames: string[] = [];
          transport.listen((frame) => frames.push(frame));
          transport.send("echo first");
          transport.send("later 200 then close 4000");
          assert.deepEqual(await transport.closed, { code: 4000, reason: "after the frames" });
          assert.deepEqual(frames, [
            "echo:echo first",
            ...Array.from({ length: 200 }, (_, i) => `later:${i}`),
          ]);
        });

        it("closes with 1009 when a frame exceeds the limit", async () => {
          const transport = await dialWebSocket(running.url, {
            protocols: PROTOCOLS,
            headers: auth,
          });
          transport.listen(() => {});
          transport.send("x".repeat(4096 + 2048));
          assert.equal((await transport.closed).code, 1009);
        });

        it("rejects a dial that is aborted", async () => {
          const controller = new AbortController();
          controller.abort();
          const error = await dialWebSocket(running.url, {
            protocols: PROTOCOLS,
            signal: controller.signal,
          })
            .catch((e) => e);
          assert.ok(error instanceof DialError);
        });
      });
    }
  }
}

for (const adapter of adapters) {
  describe(`two Peers over a real WebSocket (${adapter.name})`, { timeout: 20_000 }, () => {
    it("call, notify and close codes travel between an executor peer and a harness peer", async () => {
      const served: Peer[] = [];
      const server = await adapter.serve({
        upgrade: () =>
          Promise.resolve({
            accept: true,
            protocol: "bma.executor.v1.1",
            onOpen: (transport: Transport) => {
              const harness = new Peer(transport);
              harness.onRequest(
                "session.ready",
                ({ session_id }) => ({ ok: true, duplicate: session_id === "again" }),
              );
              harness.onNotification("tool.progress", ({ tool_call_id }) => {
                if (tool_call_id === "bye") {
                  harness.close(4004, "replaced");
                }
              });
              served.push(harness);
            },
          }),
      });
      try {
        const executor = new Peer(await adapter.dial(server.url, { protocols: PROTOCOLS }));
        assert.equal(executor.protocol, "bma.executor.v1.1");
        assert.deepEqual(await executor.call("session.ready", { session_id: "s" }), {
          ok: true,
          duplicate: false,
        });
        assert.deepEqual(await executor.call("session.ready", { session_id: "again" }), {
          ok: true,
          duplicate: true,
        });
        const pending = executor.call("session.ended", { session_id: "s" }); // unserved: -32601
        await assert.rejects(pending, (e: any) => e.code === -32601);
        executor.notify("tool.progress", { session_id: "s", tool_call_id: "bye" });
        assert.deepEqual(await executor.closed, { code: 4004, reason: "replaced" });
        assert.equal((await served[0].closed).code, 4004);
      } finally {
        await server.close();
      }
    });
  });
}

for (const adapter of adapters) {
  describe(`dial failures (${adapter.name})`, { timeout: 10_000 }, () => {
    it("reports a refused connection as DialError without a status", async () => {
      const { server } = await echoServer(adapter.serve, {});
      const url = server.url;
      await server.close();
      const error = await adapter.dial(url, { protocols: PROTOCOLS, headers: auth }).catch((e) =>
        e
      );
      assert.ok(error instanceof DialError);
      assert.equal(error.status, undefined);
    });
  });
}
