/**
 * Reconnecting: the close-code policy (stop for good on 1008, 4002, 4003, 4004 and after a
 * received executor.close; reconnect on 4001, 4005 and network failures), a fresh token on each
 * attempt, resume with executor_id and active_sessions, exponential backoff with jitter and a
 * cap on the injected clock (also across registrations while the harness closes each connection
 * with 1009), and a pending tool call surviving a cut within the lease.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ExecutorClient, ManualClock } from "../../executor/node.ts";
import { DialError } from "../../mod.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { EXECUTOR_INFO, Fixtures, SECRETS, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

describe("ExecutorClient: reconnect", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  async function connected(clock: ManualClock) {
    const harness = await ScriptedHarness.start({ clock });
    scripted.push(harness);
    const { client } = fx.client(harness, { clock });
    await client.start();
    await harness.last.peer.call("session.assign", { session_id: "ses_1" });
    await harness.last.peer.call("session.assign", { session_id: "ses_2" });
    return { harness, client };
  }

  for (
    const [code, how] of [[4001, "token expired"], [4005, "lease expired"], [1001, "going away"], [
      1011,
      "internal error",
    ]] as const
  ) {
    it(`reconnects after close ${code} (${how}) with a fresh token and resume`, async () => {
      const clock = new ManualClock();
      const { harness, client } = await connected(clock);
      const firstAuth = harness.last.headers.get("authorization");
      harness.last.peer.close(code, how);
      await until(() => client.state === "waiting", "the backoff wait");
      await clock.advance(50);
      await harness.waitForRequests("executor.register", 2);
      await until(() => client.state === "connected");
      const second = harness.connections[1];
      assert.notEqual(second.headers.get("authorization"), firstAuth, "a fresh token");
      assert.equal(harness.tokensIssued, 2);
      assert.deepEqual(second.register?.resume, {
        executor_id: "exec_scripted",
        active_sessions: ["ses_1", "ses_2"],
      });
    });
  }

  it("reconnects after a network failure (no close frame)", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness();
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const { client } = fx.client(server, {
      clock,
      harnessUrl: proxy.url,
      reconnect: { initialDelayMs: 100, jitter: 0 },
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const reconnected = new Promise<void>((resolve) => {
      harness.onExecutor((event) => event.type === "reconnected" && resolve());
    });
    assert.equal(proxy.cut(), 1);
    await until(() => client.state === "waiting", "the backoff wait");
    await clock.advance(99);
    assert.equal(proxy.accepted, 1, "no attempt before the backoff delay");
    await clock.advance(1);
    await reconnected;
    assert.equal(executor.connected, true);
    assert.equal(client.executorId, executor.id, "the same executor id, resumed");
  });

  for (
    const [code, how] of [
      [1008, "policy violation"],
      [4002, "unauthorized"],
      [4003, "protocol mismatch"],
      [4004, "replaced"],
      [1000, "normal"],
    ] as const
  ) {
    it(`stops for good on close ${code} (${how})`, async () => {
      const clock = new ManualClock();
      const { harness, client } = await connected(clock);
      harness.last.peer.close(code, how);
      const closed = await client.closed;
      assert.equal(closed.reason, "close_code");
      assert.equal(closed.code, code);
      assert.equal(client.state, "stopped");
      await clock.advance(60_000);
      assert.equal(harness.connections.length, 1, "never reconnects");
      assert.equal(harness.tokensIssued, 1);
    });
  }

  it("stops for good on 4004 when a new registration replaces it (project harness)", async () => {
    const { harness, server } = await fx.harness();
    const machine = {
      environmentKey: undefined,
      environmentId: undefined,
      machineToken: SECRETS.machineToken,
      machineId: SECRETS.machineId,
    };
    const { client: first } = fx.client(server, machine);
    first.onRequest("process.list", () => ({ processes: [] }));
    await first.start();
    const { client: second } = fx.client(server, machine);
    second.onRequest("process.list", () => ({ processes: [] }));
    await second.start();
    const closed = await first.closed;
    assert.deepEqual([closed.reason, closed.code], ["close_code", 4004]);
    assert.equal(second.state, "connected");
    const executor = await harness.waitExecutor();
    assert.equal(executor.id, `exec_${SECRETS.machineId}`);
  });

  it("stops for good after a received executor.close, whatever close follows (project harness)", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    await client.start();
    const executor = await harness.waitExecutor();
    await executor.close("decommissioned");
    const closed = await client.closed;
    assert.equal(closed.reason, "executor_close");
    assert.equal(client.state, "stopped");
  });

  it("backs off exponentially with jitter up to the cap, with a fresh token each attempt", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock });
    scripted.push(harness);
    harness.refuseUpgrade = 503;
    const { client } = fx.client(harness, {
      clock,
      random: () => 0.5,
      reconnect: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 400, jitter: 0.5 },
    });
    const started = client.start();
    // With random 0.5 and jitter 0.5 each delay is 75% of 100, 200, 400, 400 (the cap).
    for (const [attempt, delay] of [[1, 75], [2, 150], [3, 300], [4, 300], [5, 300]]) {
      await until(() => client.state === "waiting" && harness.tokensIssued === attempt);
      await clock.advance(delay - 1);
      assert.equal(harness.tokensIssued, attempt, `no attempt ${attempt + 1} before ${delay} ms`);
      await clock.advance(1);
      await until(() => harness.tokensIssued === attempt + 1, `attempt ${attempt + 1}`);
    }
    await until(() => client.state === "waiting" && harness.tokensIssued === 6);
    harness.refuseUpgrade = undefined;
    await clock.advance(300);
    await started;
    assert.equal(harness.connections.length, 1);
    assert.equal(harness.tokensIssued, 7, "a fresh token for every attempt");
  });

  it("once registered, waits at most the harness's heartbeat interval between attempts (its lease is two)", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 1000 });
    scripted.push(harness);
    const { client } = fx.client(harness, {
      clock,
      random: () => 0.5,
      reconnect: { initialDelayMs: 250, multiplier: 2, maxDelayMs: 30_000, jitter: 0.5 },
    });
    await client.start();
    // The harness goes away (its upgrades refused): after the close and each failed attempt,
    // 75% of 250, 250, 500, 1000, then of 1000 again, not of 2000 and 4000 (the interval caps
    // the backoff before its jitter, as the policy's own cap does).
    harness.refuseUpgrade = 503;
    harness.last.peer.close(1001, "going away");
    for (const [attempt, delay] of [[1, 188], [2, 188], [3, 375], [4, 750], [5, 750], [6, 750]]) {
      await until(() => client.state === "waiting" && harness.tokensIssued === attempt);
      await clock.advance(delay - 1);
      assert.equal(harness.tokensIssued, attempt, `no attempt ${attempt + 1} before ${delay} ms`);
      await clock.advance(1);
      await until(() => harness.tokensIssued === attempt + 1, `attempt ${attempt + 1}`);
    }
    await until(() => client.state === "waiting" && harness.tokensIssued === 7);
    harness.refuseUpgrade = undefined;
    await clock.advance(750);
    await until(() => client.state === "connected", "back within the lease");
    assert.equal(harness.connections.length, 2);
  });

  it("backs off across registrations while the harness closes each connection with 1009", async () => {
    const clock = new ManualClock();
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 60_000 });
    scripted.push(harness);
    const { client, logger } = fx.client(harness, {
      clock,
      random: () => 0.5,
      reconnect: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 30_000, jitter: 0.5 },
    });
    await client.start();
    // Each connection registers, then is closed for a frame over the harness's limit: the
    // waits grow (75% of 100, 200, 400, 800), a registration between does not reset them.
    for (const [closes, delay] of [[1, 75], [2, 150], [3, 300], [4, 600]]) {
      harness.last.peer.close(1009, "message too big");
      await until(() => client.state === "waiting" && harness.connections.length === closes);
      await clock.advance(delay - 1);
      assert.equal(harness.tokensIssued, closes, `no attempt before ${delay} ms`);
      await clock.advance(1);
      await until(() => client.state === "connected" && harness.connections.length === closes + 1);
    }
    assert.equal(
      logger.records.filter((r) => r.message.includes("over its size limit (1009)")).length,
      4,
    );
    // Any other close of a connection that lasted starts over.
    await clock.advance(1_000);
    harness.last.peer.close(1001, "going away");
    await until(() => client.state === "waiting" && harness.connections.length === 5);
    await clock.advance(75);
    await until(() => client.state === "connected" && harness.connections.length === 6);
  });

  it("backs off across registrations while the harness closes each connection at once, whatever heartbeat it hands out", async () => {
    const clock = new ManualClock();
    // A heartbeat of 1 ms: it capped every wait at 1 ms, a reconnect storm.
    const harness = await ScriptedHarness.start({ clock, heartbeatIntervalMs: 1 });
    scripted.push(harness);
    const { client } = fx.client(harness, {
      clock,
      random: () => 0.5,
      reconnect: { initialDelayMs: 100, multiplier: 2, maxDelayMs: 30_000, jitter: 0.5 },
    });
    await client.start();
    // Each connection registers, then the harness closes it (1011, a crash loop): the waits grow
    // (75% of 100, 200, 400, 800, then of the least cap, 1000), a registration between does
    // not reset them.
    for (const [closes, delay] of [[1, 75], [2, 150], [3, 300], [4, 600], [5, 750], [6, 750]]) {
      harness.last.peer.close(1011, "internal error");
      await until(() => client.state === "waiting" && harness.connections.length === closes);
      await clock.advance(delay - 1);
      assert.equal(harness.tokensIssued, closes, `no attempt before ${delay} ms`);
      await clock.advance(1);
      await until(() => client.state === "connected" && harness.connections.length === closes + 1);
    }
    // (A connection that lasted a second starts over: the 1009 case above ends with one.)
  });

  it("keeps nothing per failed connection attempt: its signal stops following the client's", async () => {
    // Node 20's AbortSignal.any left an entry on the client's stop signal per attempt, for ever:
    // an attempt's signal that still aborts with the client's stop, once the attempt is over, is
    // one its stop signal still holds.
    const signals: AbortSignal[] = [];
    const client = new ExecutorClient({
      harnessUrl: "ws://127.0.0.1:9/",
      executor: EXECUTOR_INFO,
      reconnect: { initialDelayMs: 0, maxDelayMs: 0 },
      dial: (_url, options) => {
        signals.push(options!.signal!);
        return Promise.reject(new DialError("the harness is down"));
      },
    });
    client.start().catch(() => {});
    await until(() => signals.length >= 3, "three attempts");
    await client.stop();
    const over = signals.slice(0, 2);
    assert.deepEqual(over.map((signal) => signal.aborted), [false, false]);
  });

  it("keeps a pending tool call across a cut within the lease: the call completes once", async () => {
    const { harness, server } = await fx.harness();
    const proxy = await ChaosProxy.start(server.url);
    fx.defer(() => proxy.close());
    const clock = new ManualClock();
    const { client } = fx.client(server, {
      clock,
      harnessUrl: proxy.url,
      reconnect: { initialDelayMs: 100, jitter: 0 },
    });
    let runs = 0;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    client.tools.bash.handle(async () => {
      runs++;
      started();
      await released;
      return { stdout: "survived", stderr: "", exit_code: 0 };
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    const call = session.tools.bash.call({ command: "long" }, { toolCallId: "c_long" });
    await running;
    proxy.cut();
    await until(() => client.state === "waiting", "the cut noticed");
    await clock.advance(100);
    await until(() => client.state === "connected" && executor.connected, "the reconnect");
    assert.equal(harness.sessions.get("ses_1")?.state, "ready", "the session was resumed");
    release();
    const result = await call;
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content?.stdout, "survived");
    assert.equal(runs, 1);
  });

  it("cleans up sessions the harness did not resume after its lease expired", async () => {
    const harnessClock = new ManualClock();
    const clientClock = new ManualClock();
    const { harness, server } = await fx.harness({
      clock: harnessClock,
      heartbeatIntervalMs: 1_000,
    });
    const { client } = fx.client(server, {
      clock: clientClock,
      reconnect: { initialDelayMs: 10, jitter: 0 },
    });
    const cleaned: string[] = [];
    client.onSessionAssign((session) => {
      session.onCleanup((cleanup) => void cleaned.push(`${cleanup.sessionId}:${cleanup.reason}`));
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    // The executor's heartbeats run on its own clock, which stands still: the lease expires.
    await harnessClock.advance(2_000);
    assert.deepEqual(await executor.closed, { reason: "lease_expired" });
    await until(() => client.state === "waiting", "reconnect backoff after 4005");
    await clientClock.advance(10);
    await until(() => cleaned.length === 1, "the cleanup");
    assert.deepEqual(cleaned, ["ses_1:not_resumed"]);
    assert.equal(client.session("ses_1"), undefined);
    assert.equal(client.state, "connected");
  });
});
