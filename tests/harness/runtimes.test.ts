/**
 * The runtime-neutral harness core on every server this runtime runs (the `ws` server, plus
 * Deno's or Bun's own), and its web-standard `fetch` handler used in-process.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DialError, type WebSocketServe } from "../../mod.ts";
import { Harness, type HarnessOptions } from "../../harness/mod.ts";
import { Harness as NodeHarness } from "../../harness/node.ts";
import { Harness as DenoHarness } from "../../harness/deno.ts";
import { Harness as BunHarness } from "../../harness/bun.ts";
import * as nodeWs from "../../transport/node.ts";
import * as denoWs from "../../transport/deno.ts";
import * as bunWs from "../../transport/bun.ts";
import { dialWebSocket } from "../../transport/node.ts";
import { ExecutorPeer, OFFERED, registerParams } from "../helpers/executor-peer.ts";

const runtime = "Deno" in globalThis ? "deno" : "Bun" in globalThis ? "bun" : "node";
const servers: {
  name: string;
  serve: WebSocketServe;
  preset: new (o?: HarnessOptions) => Harness;
}[] = [
  { name: "ws", serve: nodeWs.serveWebSocket, preset: NodeHarness },
  ...(runtime === "deno"
    ? [{ name: "deno", serve: denoWs.serveWebSocket, preset: DenoHarness }]
    : []),
  ...(runtime === "bun" ? [{ name: "bun", serve: bunWs.serveWebSocket, preset: BunHarness }] : []),
];

const SECRET = "an-hs256-secret-of-at-least-32-bytes!";

for (const { name, serve, preset } of servers) {
  describe(`Harness on the ${name} server`, { timeout: 20_000 }, () => {
    it("authenticates with its token endpoint, registers an executor and completes a call", async () => {
      const harness = new Harness({
        server: serve,
        tokens: {
          secret: SECRET,
          credentials: [{ machineId: "m_rt", machineToken: "mt_rt" }],
        },
      });
      const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
      try {
        const response = await fetch(`${server.httpUrl}/v1/machines/m_rt/token`, {
          method: "POST",
          headers: { authorization: "Bearer mt_rt" },
        });
        assert.equal(response.status, 200);
        const { token, url } = await response.json() as { token: string; url: string };
        await assert.rejects(
          dialWebSocket(url, { protocols: OFFERED }),
          (error: unknown) => error instanceof DialError && error.status === 401,
        );
        const peer = await ExecutorPeer.dial(url, {
          headers: { authorization: `Bearer ${token}` },
        });
        const result = await peer.start(registerParams({ environment_id: "", machine_id: "m_rt" }));
        assert.equal(result.executor_id, "exec_m_rt");
        const executor = await harness.waitExecutor();
        const session = await executor.assignSession({ session_id: "ses_rt" });
        const call = session.tools.bash.call({ command: "uname" });
        await peer.completeBash(await peer.nextToolCall(), name);
        assert.equal((await call).structured_content?.stdout, name);
        await peer.close();
      } finally {
        await harness.close();
        await server.close();
      }
    });

    it("is what the runtime's preset Harness serves with", async () => {
      const harness = new preset({ insecureNoAuth: true });
      const server = await harness.serve();
      try {
        const peer = await ExecutorPeer.dial(server.url);
        assert.match((await peer.start()).executor_id, /^exec_/);
        await peer.close();
      } finally {
        await harness.close();
        await server.close();
      }
    });
  });
}

describe("Harness.fetch in-process", { timeout: 20_000 }, () => {
  const harness = new Harness({
    tokens: {
      secret: SECRET,
      credentials: [{ environmentId: "env_f", environmentKey: "ek_f" }],
      connectUrl: "wss://harness.example/v1/executors/connect",
    },
  });

  it("serves the token endpoint as a web-standard handler", async () => {
    const response = await harness.fetch(
      new Request("https://harness.example/v1/environments/env_f/token", {
        method: "POST",
        headers: { authorization: "Bearer ek_f" },
      }),
    );
    assert.equal(response.status, 200);
    const body = await response.json() as { url: string; expires_in: number };
    assert.equal(body.url, "wss://harness.example/v1/executors/connect");
    assert.equal(body.expires_in, 300);
  });

  it("answers a connect request 426 without an upgrader, 400/401 before that, 404 elsewhere", async () => {
    const { token } = await (await harness.fetch(
      new Request("https://h/v1/environments/env_f/token", {
        method: "POST",
        headers: { authorization: "Bearer ek_f" },
      }),
    )).json() as { token: string };
    const connect = (headers: Record<string, string>) =>
      harness.fetch(
        new Request("https://h/v1/executors/connect", {
          headers: { upgrade: "websocket", ...headers },
        }),
      );
    const offered = { "sec-websocket-protocol": OFFERED.join(", ") };
    assert.equal((await connect({ ...offered, authorization: `Bearer ${token}` })).status, 426);
    assert.equal((await connect({ ...offered, authorization: "Bearer nope" })).status, 401);
    assert.equal((await connect({ authorization: `Bearer ${token}` })).status, 400);
    assert.equal((await harness.fetch(new Request("https://h/unknown"))).status, 404);
  });
});

describe("Harness.fetch mounted in your own server", { timeout: 20_000 }, () => {
  interface DenoLike {
    serve(
      options: { hostname: string; port: number; onListen?: () => void },
      handler: (request: Request) => Promise<Response>,
    ): { addr: { port: number }; shutdown(): Promise<void> };
    upgradeWebSocket(request: Request, options: { protocol: string }): {
      socket: import("../../transport/websocket.ts").WebSocketLike;
      response: Response;
    };
  }
  const deno = (globalThis as { Deno?: DenoLike }).Deno;

  it("serves executors from Deno.serve with Deno.upgradeWebSocket as the upgrader", {
    skip: deno ? false : "needs Deno.serve (runs on Deno)",
  }, async () => {
    const harness = new Harness({ authenticate: (r) => r.token === "ok" ? {} : Promise.reject() });
    const server = deno!.serve(
      { hostname: "127.0.0.1", port: 0, onListen: () => {} },
      (request) =>
        harness.fetch(request, {
          upgrade: (req, protocol) => {
            // Deno splits the offered list on ", " only: negotiate here, answer with the header.
            const upgraded = deno!.upgradeWebSocket(req, { protocol: "" });
            upgraded.response.headers.set("sec-websocket-protocol", protocol);
            return upgraded;
          },
        }),
    );
    try {
      const url = `ws://127.0.0.1:${server.addr.port}/v1/executors/connect`;
      await assert.rejects(
        dialWebSocket(url, { protocols: OFFERED, headers: { authorization: "Bearer no" } }),
        (error: unknown) => error instanceof DialError && error.status === 401,
      );
      const peer = await ExecutorPeer.dial(url, { headers: { authorization: "Bearer ok" } });
      assert.equal(peer.transport.protocol, "bma.executor.v1.1");
      assert.match((await peer.start()).executor_id, /^exec_/);
      const executor = await harness.waitExecutor();
      const session = await executor.assignSession({ session_id: "ses_fetch" });
      const call = session.tools.bash.call({ command: "true" });
      await peer.completeBash(await peer.nextToolCall(), "mounted");
      assert.equal((await call).structured_content?.stdout, "mounted");
      await peer.close();
    } finally {
      await harness.close();
      await server.shutdown();
    }
  });
});
