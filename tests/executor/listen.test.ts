/**
 * Listen mode (the harness dials the executor) over the life of its harnesses: a harness that
 * closes, restarts or closes its link leaves the executor listening, its sessions kept for the
 * next dial; `executor.close` and the seeds' refusal codes still stop it. And its one connection
 * at a time is not held by an upgrade that never opened (a malformed request offering the
 * subprotocol). On every server this runtime runs: `ws` (transport/node.ts) everywhere, plus the
 * runtime's own (`Deno.serve`, `Bun.serve`).
 */
import { after, afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorClient } from "../../executor/node.ts";
import { Harness } from "../../harness/node.ts";
import {
  type HarnessStore,
  MemoryHarnessStore,
  type Transport,
  type WebSocketServe,
} from "../../mod.ts";
import * as nodeWs from "../../transport/node.ts";
import * as denoWs from "../../transport/deno.ts";
import * as bunWs from "../../transport/bun.ts";
import { EXECUTOR_INFO } from "../helpers/executor-fixture.ts";

const runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const servers: { name: string; serve: WebSocketServe }[] = [
  { name: "ws", serve: nodeWs.serveWebSocket },
  ...(runtime === "deno" ? [{ name: "deno", serve: denoWs.serveWebSocket }] : []),
  ...(runtime === "bun" ? [{ name: "bun", serve: bunWs.serveWebSocket }] : []),
];

const dir = mkdtempSync(join(tmpdir(), "bma-listen-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const owned: { stop(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const thing of owned.splice(0).reverse()) await thing.stop();
});

function harness(store?: HarnessStore): Harness {
  const h = new Harness(store ? { store } : {});
  owned.push({ stop: () => h.close() });
  return h;
}

let sockets = 0;
async function listeningClient(serve: WebSocketServe, name: string) {
  const client = new ExecutorClient({ executor: EXECUTOR_INFO, server: serve });
  client.tools.bash.handle(() => "ok");
  owned.push({ stop: () => client.stop() });
  const path = join(dir, `${name}-${++sockets}.sock`);
  const listener = await client.listen(`unix://${path}`);
  return { client, path, ...listener };
}

/** Dials `url` with a harness and resolves with the executor that registers on it. */
async function dialIn(h: Harness, url: string) {
  const executor = h.waitExecutor();
  // A dial that fails leaves the wait to the harness's close, which rejects it.
  executor.catch(() => {});
  const link = await h.dial(url, { once: true });
  return { link, executor: await executor };
}

/** Writes `request` on the socket at `path` and resolves with the answer once it closes. */
function rawExchange(path: string, request: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = createConnection({ path });
    let answer = "";
    socket.on("data", (chunk) => (answer += chunk));
    socket.on("error", () => {});
    socket.on("close", () => resolve(answer));
    socket.write(request);
  });
}

// `Connection: close`: answered, the socket is closed (Deno.serve and Bun.serve would keep it).
const MALFORMED: Record<string, string> = {
  "no Sec-WebSocket-Key": "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, close\r\n" +
    "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" +
    "Sec-WebSocket-Protocol: bma.executor.v1.1\r\n\r\n",
  "Upgrade: h2c": "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade, close\r\n" +
    "Upgrade: h2c\r\nSec-WebSocket-Protocol: bma.executor.v1.1\r\n\r\n",
};

for (const { name, serve } of servers) {
  describe(
    `ExecutorClient.listen (${name}): the harnesses come and go`,
    { timeout: 30_000 },
    () => {
      it("a harness that closes leaves it listening: the next harness on its store dials it and it resumes", async () => {
        const { client, path, url, registered } = await listeningClient(serve, name);
        const store = new MemoryHarnessStore();
        const first = harness(store);
        const { executor } = await dialIn(first, url);
        assert.equal(executor.id, (await registered).executor_id);
        const session = await executor.assignSession({ session_id: "ses_listen_1" });
        await session.ready();
        await first.close();
        assert.ok(existsSync(path), "the socket is still there");

        // The restarted harness: a new one on the store the first let go of.
        const second = harness(store);
        const { executor: again } = await dialIn(second, url);
        assert.equal(again.id, executor.id, "resumed: the same executor, not a new registration");
        assert.ok(client.session("ses_listen_1"), "the executor kept its session");
        assert.ok(second.session("ses_listen_1"), "the next harness has it back");
        assert.ok(!["stopping", "stopped"].includes(client.state), client.state);
      });

      it("a harness that closes tells it 1001 (going away), as it tells executors that dialed in", async () => {
        // The executor's side of each connection, as its server opened it.
        const opened: Transport[] = [];
        const watching: WebSocketServe = (options) =>
          serve({
            ...options,
            upgrade: async (request, protocols) => {
              const decision = await options.upgrade(request, protocols);
              if (!decision.accept) return decision;
              return {
                ...decision,
                onOpen: (transport) => {
                  opened.push(transport);
                  decision.onOpen(transport);
                },
              };
            },
          });
        const { url } = await listeningClient(watching, `${name}-watched`);
        const h = harness();
        await dialIn(h, url);
        await h.close();
        assert.equal(opened.length, 1);
        assert.deepEqual(await opened[0].closed, { code: 1001, reason: "harness shutting down" });
      });

      it("a link closed by its harness (1000) leaves it listening for the next dial", async () => {
        const { client, path, url } = await listeningClient(serve, name);
        const h = harness();
        const { link, executor } = await dialIn(h, url);
        await link.close();
        const { executor: again } = await dialIn(h, url);
        assert.equal(again.id, executor.id);
        assert.ok(!["stopping", "stopped"].includes(client.state), client.state);
        assert.ok(existsSync(path));
      });

      it("executor.close stops it for good, and its socket goes", async () => {
        const { client, path, url } = await listeningClient(serve, name);
        const h = harness();
        const { executor } = await dialIn(h, url);
        await executor.close("done with it");
        const info = await client.closed;
        assert.equal(info.reason, "executor_close");
        assert.ok(!existsSync(path), "the socket is removed");
      });

      for (const code of [4004, 1008]) {
        it(`a refusal close code (${code}) stops it for good`, async () => {
          const { client, path, url } = await listeningClient(serve, name);
          const transport: Transport = await nodeWs.dialWebSocket(url, {
            protocols: ["bma.executor.v1.1"],
          });
          // It speaks first: its executor.register, then the refusal.
          await new Promise<void>((resolve) => transport.listen(() => resolve()));
          transport.close(code, "refused");
          const info = await client.closed;
          assert.deepEqual({ reason: info.reason, code: info.code }, {
            reason: "close_code",
            code,
          });
          assert.ok(!existsSync(path));
        });
      }
    },
  );

  describe(
    `ExecutorClient.listen (${name}): an upgrade that never opens`,
    { timeout: 30_000 },
    () => {
      for (const [what, request] of Object.entries(MALFORMED)) {
        it(`one with ${what} offering the subprotocol does not hold the socket (no 409 after)`, async () => {
          const { url, path } = await listeningClient(serve, name);
          const answer = await rawExchange(path, request);
          assert.match(answer, /^HTTP\/1\.1 4\d\d /, "refused");
          const { executor } = await dialIn(harness(), url);
          assert.ok(executor.id);
        });
      }
    },
  );
}
