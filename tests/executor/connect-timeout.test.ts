/**
 * A connection attempt ends by a deadline: a token endpoint that takes the request and never
 * answers (a frozen harness behind a kept-alive connection), or a server that accepts the
 * WebSocket dial and never upgrades it, costs the attempt its deadline (one heartbeat interval
 * of the harness, at least 2 s; or `connectTimeoutMs`), and the client tries again. On the
 * injected clock, over real sockets on 127.0.0.1.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { ConnectTimeoutError, ExecutorConfigError, ManualClock } from "../../executor/node.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

describe("ExecutorClient: connection attempts end by a deadline", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  it("a token request never answered is given up after one heartbeat interval (at least 2 s)", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 1_000 });
    scripted.push(harness);
    const { client, logger } = fx.client(harness, {
      clock,
      reconnect: { initialDelayMs: 10, maxDelayMs: 10, jitter: 0 },
    });
    await client.start();
    let open!: () => void;
    harness.tokenGate = new Promise((resolve) => (open = resolve));
    harness.last.peer.close(1001, "going away");
    await until(() => client.state === "waiting", "the backoff wait");
    await clock.advance(10);
    await until(() => harness.tokenRequests.length === 2, "the held token request");
    await clock.advance(1_999);
    assert.equal(client.state, "connecting", "still within the deadline");
    await clock.advance(1);
    await until(() => client.state === "waiting", "the attempt given up");
    const failed = logger.records.find((r) => r.message === "connection attempt failed: retrying");
    assert.equal(failed?.fields?.stage, "token");
    assert.match(String(failed?.fields?.error), /token exchange took over 2000 ms/);
    harness.tokenGate = undefined;
    open();
    await clock.advance(10);
    await until(() => client.state === "connected", "connected again");
    assert.equal(harness.connections.length, 2);
  });

  it("a dial that is never upgraded is given up after connectTimeoutMs", async () => {
    const clock = new ManualClock();
    const accepted: Socket[] = [];
    const silent = createServer((socket) => void accepted.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    fx.defer(async () => {
      for (const socket of accepted) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    });
    const port = (silent.address() as { port: number }).port;
    const { client, logger } = fx.client({ httpUrl: "http://unused" }, {
      clock,
      harnessUrl: `ws://127.0.0.1:${port}/v1/executors/connect`,
      environmentKey: undefined,
      environmentId: undefined,
      connectTimeoutMs: 5_000,
      reconnect: { initialDelayMs: 10, maxDelayMs: 10, jitter: 0 },
    });
    void client.start().catch(() => {});
    await until(() => accepted.length === 1, "the first dial");
    await clock.advance(4_999);
    assert.equal(accepted.length, 1);
    await clock.advance(1);
    await until(() => client.state === "waiting", "the attempt given up");
    const failed = logger.records.find((r) => r.message === "connection attempt failed: retrying");
    assert.equal(failed?.fields?.stage, "dial");
    await clock.advance(10);
    await until(() => accepted.length === 2, "a second dial");
  });

  it("refuses a connectTimeoutMs that is not a positive number", () => {
    for (const connectTimeoutMs of [0, -1, Number.NaN, Infinity]) {
      assert.throws(
        () => fx.client({ httpUrl: "http://127.0.0.1:9" }, { connectTimeoutMs }),
        ExecutorConfigError,
      );
    }
  });

  it("ConnectTimeoutError says which stage and how long", () => {
    const error = new ConnectTimeoutError("dial", 2_000);
    assert.equal(error.stage, "dial");
    assert.equal(error.timeoutMs, 2_000);
    assert.match(error.message, /WebSocket dial took over 2000 ms/);
  });
});
