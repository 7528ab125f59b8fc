/**
 * The lease: heartbeats at the interval register returned (on the injected clock), drain from a
 * heartbeat result, and a connection dropped when its heartbeats go unanswered.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { type DrainInfo, ManualClock, UnavailableError } from "../../executor/node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

describe("ExecutorClient: lease", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  it("heartbeats every heartbeat_interval_ms and keeps the lease (project harness)", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness({ clock, heartbeatIntervalMs: 1_000 });
    const { client } = fx.client(server, { clock });
    const registration = await client.start();
    assert.equal(registration.heartbeat_interval_ms, 1_000);
    const executor = await harness.waitExecutor();
    assert.equal(executor.leaseExpiresAt, clock.now() + 2_000);
    for (let beat = 1; beat <= 10; beat++) {
      await clock.advance(1_000);
      // Each heartbeat renews the lease to two intervals from now.
      await until(() => executor.leaseExpiresAt === clock.now() + 2_000, `heartbeat ${beat}`);
    }
    assert.equal(executor.gone, false);
    assert.equal(executor.connected, true);
    assert.equal(client.state, "connected");
  });

  it("reports the sessions it holds with each heartbeat", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 500 });
    scripted.push(harness);
    const { client } = fx.client(harness, { clock });
    await client.start();
    await harness.last.peer.call("session.assign", { session_id: "ses_a" });
    await harness.last.peer.call("session.assign", { session_id: "ses_b" });
    await clock.advance(500);
    await harness.waitForRequests("executor.heartbeat");
    assert.deepEqual(harness.requests("executor.heartbeat")[0].params, {
      active_sessions: ["ses_a", "ses_b"],
    });
  });

  it("drains when a heartbeat result says drain: true", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 500 });
    scripted.push(harness);
    const { client } = fx.client(harness, { clock });
    const drains: DrainInfo[] = [];
    client.onDrain((info) => void drains.push(info));
    await client.start();
    await harness.last.peer.call("session.assign", { session_id: "ses_1" });
    harness.on("executor.heartbeat", () => ({ drain: true }));
    await clock.advance(500);
    await until(() => drains.length === 1, "onDrain");
    assert.deepEqual(drains, [{ source: "heartbeat" }]);
    assert.equal(client.draining, true);
    const refused = await harness.last.peer.call("session.assign", { session_id: "ses_2" })
      .then(() => undefined, (e) => e);
    assert.ok(refused instanceof UnavailableError, String(refused));
    assert.deepEqual(refused.data, { reason: "draining" });
    // The session it holds stays; a repeat of its assignment is still accepted.
    assert.deepEqual(await harness.last.peer.call("session.assign", { session_id: "ses_1" }), {
      session_id: "ses_1",
      accepted: true,
    });
    await clock.advance(500);
    assert.equal(drains.length, 1, "onDrain runs once");
  });

  it("drops a connection whose heartbeat goes unanswered for half an interval and reconnects", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 1_000 });
    scripted.push(harness);
    const { client } = fx.client(harness, { clock, reconnect: { initialDelayMs: 10, jitter: 0 } });
    await client.start();
    await harness.last.peer.call("session.assign", { session_id: "ses_1" });
    harness.on(
      "executor.heartbeat",
      (_params, { connection }) =>
        connection.index === 0 ? new Promise(() => {}) : { drain: false },
    );
    // The first heartbeat goes at 1 000 ms, and is given up on at 1 500 ms.
    await clock.advance(1_499);
    assert.equal(harness.connections.length, 1);
    assert.equal(client.state, "connected", "not before half an interval");
    await clock.advance(1);
    await until(() => client.state === "waiting", "the dropped connection");
    await clock.advance(10);
    await harness.waitForRequests("executor.register", 2);
    assert.deepEqual(harness.connections[1].register?.resume, {
      executor_id: "exec_scripted",
      active_sessions: ["ses_1"],
    });
  });
  it("resumes its sessions after a link that went silent, within the harness's lease (project harness)", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness({ clock, heartbeatIntervalMs: 1_000 });
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const { client } = fx.client(server, {
      clock,
      harnessUrl: proxy.url,
      reconnect: { initialDelayMs: 10, jitter: 0 },
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_silent" });
    await session.ready();
    // The link goes silent: nothing the executor sends arrives, and nothing closes. The harness's
    // lease runs out two intervals after its last renewal, at 2 000 ms.
    proxy.stall();
    await clock.advance(1_500);
    await until(() => client.state === "waiting", "the silent connection dropped");
    proxy.cut();
    proxy.resume();
    await clock.advance(10);
    await until(() => executor.connected && proxy.accepted === 2, "registered again");
    await clock.advance(1_000);
    assert.equal(executor.gone, false);
    assert.equal(session.state, "ready");
    assert.deepEqual(client.sessions.map((held) => held.id), ["ses_silent"]);
  });
});
