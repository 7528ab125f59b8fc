/**
 * Sessions: assignment (accept, refuse, limits), ready, status, stop with cleanup hooks and a
 * grace period on the injected clock, session.ended retried until accepted, one-shot sessions.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  CapabilityMissingError,
  ManualClock,
  ResourceExhaustedError,
  type SessionCleanup,
  type SessionMetadata,
  UnavailableError,
} from "../../executor/node.ts";
import { Fixtures, until } from "../helpers/executor-fixture.ts";
import { ScriptedHarness } from "../helpers/scripted-harness.ts";

/**
 * Resolves once the executor has taken every request sent on `peer` before: it handles requests
 * in order, and answers a cancel of an unknown call at once.
 */
async function dispatchedBefore(peer: { call(method: string, params: unknown): Promise<unknown> }) {
  await peer.call("tool.cancel", { tool_call_id: "call_barrier" });
}

/** Metadata with members of the harness's own (the contract allows extra fields). */
function extra(fields: Record<string, unknown>): SessionMetadata {
  return fields as SessionMetadata;
}

describe("ExecutorClient: sessions", { timeout: 30_000 }, () => {
  const fx = new Fixtures();
  const scripted: ScriptedHarness[] = [];
  afterEach(async () => {
    await fx.cleanup();
    for (const harness of scripted.splice(0)) await harness.close();
  });

  it("accepts a session by default and reports it ready", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    client.tools.bash.handle(() => "ok");
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({
      session_id: "ses_1",
      metadata: extra({ team: "x" }),
    });
    await session.ready();
    await until(() => client.session("ses_1")?.state === "ready");
    const held = client.session("ses_1")!;
    assert.deepEqual(held.metadata, { source: "harness", team: "x" });
    assert.equal(held.oneShot, false);
  });

  it("runs onSessionAssign before accepting; session.ready follows sessionReady()", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    const setUp: string[] = [];
    client.onSessionAssign((session, params) => {
      setUp.push(`${session.id}:${params.tools?.join(",")}`);
      // Set-up continues after the answer; ready is reported when it is done.
      // Caught: the test may end (and stop the client) before the ack of session.ready arrives.
      queueMicrotask(() => void client.sessionReady(session.id).catch(() => {}));
    });
    client.tools.bash.handle(() => "ok");
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1", tools: ["bash"] });
    await session.ready();
    assert.deepEqual(setUp, ["ses_1:bash"]);
  });

  it("refuses with the handler's error, with -32009 beyond maxSessions, and -32012 for a tool it does not serve", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { maxSessions: 1 });
    client.tools.bash.handle(() => "ok");
    client.onSessionAssign((session) => {
      if ((session.metadata as Record<string, unknown>).gpu) {
        throw new ResourceExhaustedError("no gpu", { reason: "no_gpu" });
      }
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const gpu = await executor.assignSession({
      session_id: "ses_gpu",
      metadata: extra({ gpu: true }),
    })
      .then(() => undefined, (e) => e);
    assert.ok(gpu instanceof ResourceExhaustedError, String(gpu));
    assert.equal(gpu.reason, "no_gpu");
    const tool = await executor.assignSession({ session_id: "ses_t", tools: ["bash", "grep"] })
      .then(() => undefined, (e) => e);
    assert.ok(tool instanceof CapabilityMissingError, String(tool));
    assert.deepEqual(tool.data, { reason: "capability_missing", capability: "tool:grep" });
    await executor.assignSession({ session_id: "ses_1" });
    const full = await executor.assignSession({ session_id: "ses_2" }).then(
      () => undefined,
      (e) => e,
    );
    assert.ok(full instanceof ResourceExhaustedError, String(full));
    assert.equal(full.code, -32009);
    assert.equal(full.reason, "max_sessions");
    assert.deepEqual(client.sessions.map((s) => s.id), ["ses_1"]);
  });

  it("refuses an assignment whose onSessionAssign never settles at assignTimeoutMs, freeing its slot", async () => {
    // No heartbeat within the clock's advance: this harness answers on its own, real, clock.
    const harness = await ScriptedHarness.start({ heartbeatIntervalMs: 600_000 });
    scripted.push(harness);
    const clock = new ManualClock();
    const { client } = fx.client(harness, { clock, maxSessions: 1, assignTimeoutMs: 5_000 });
    const aborted: unknown[] = [];
    let handlers = 0;
    client.onSessionAssign((session) => {
      handlers++;
      if (session.id !== "ses_stuck") return;
      session.signal.addEventListener("abort", () => aborted.push(session.signal.reason));
      return new Promise<void>(() => {}); // a set-up that never ends
    });
    await client.start();
    const peer = harness.last.peer;
    const first = peer.call("session.assign", { session_id: "ses_stuck" }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    await until(() => handlers === 1, "the handler ran");
    // A repeat (the harness retrying after a reconnect) waits for the first's answer.
    const repeat = peer.call("session.assign", { session_id: "ses_stuck" }).then(
      (result) => ({ result }),
      (error) => ({ error }),
    );
    await dispatchedBefore(peer);
    await clock.advance(4_999);
    assert.equal(client.session("ses_stuck")?.id, "ses_stuck", "held until the bound");
    await clock.advance(1);
    for (const answer of [await first, await repeat]) {
      const error = (answer as { error?: UnavailableError }).error;
      assert.ok(error instanceof UnavailableError, JSON.stringify(answer));
      assert.equal(error.reason, "setup_timeout");
    }
    assert.equal(client.session("ses_stuck"), undefined);
    assert.equal(aborted.length, 1, "the session's signal told the handler");
    // The slot is free again.
    assert.deepEqual(await peer.call("session.assign", { session_id: "ses_next" }), {
      session_id: "ses_next",
      accepted: true,
    });
  });

  it("a repeat assignment while onSessionAssign runs gets the handler's refusal, not an early accept", async () => {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness);
    let refuse!: () => void;
    client.onSessionAssign(() =>
      new Promise<void>((_, reject) => {
        refuse = () => reject(new ResourceExhaustedError("no gpu", { reason: "no_gpu" }));
      })
    );
    await client.start();
    const peer = harness.last.peer;
    const settle = (call: Promise<unknown>) =>
      call.then((result) => ({ result }), (error) => ({ error }));
    const first = settle(peer.call("session.assign", { session_id: "ses_gpu" }));
    await until(() => refuse !== undefined, "the handler ran");
    const repeat = settle(peer.call("session.assign", { session_id: "ses_gpu" }));
    await dispatchedBefore(peer);
    refuse();
    for (const answer of [await first, await repeat]) {
      const error = (answer as { error?: ResourceExhaustedError }).error;
      assert.ok(error instanceof ResourceExhaustedError, JSON.stringify(answer));
      assert.equal(error.reason, "no_gpu");
    }
    assert.equal(client.session("ses_gpu"), undefined);
  });

  it("reports session.status with free-form detail", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    client.sessionStatus("ses_1", "error", "mcp_unavailable");
    await until(() => session.reportedStatus !== undefined);
    assert.deepEqual(session.reportedStatus, { status: "error", detail: "mcp_unavailable" });
  });

  it("session.stop aborts its calls, runs cleanup hooks (SIGTERM, SIGKILL after the grace period), then sends session.ended", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { clock });
    const signals: string[] = [];
    let callAborted = false;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    client.tools.bash.handle((_input, ctx) =>
      new Promise(() => {
        ctx.signal.addEventListener("abort", () => (callAborted = true));
        started();
      })
    );
    client.onSessionStop((session, params) => {
      signals.push(`stop:${session.id}:${params.reason}`);
    });
    client.onSessionAssign((session) => {
      session.onCleanup(async (cleanup: SessionCleanup) => {
        signals.push(`SIGTERM after ${cleanup.reason}, grace ${cleanup.graceMs}`);
        // A process that ignores SIGTERM: killed when the grace period is over.
        await new Promise((resolve) => cleanup.graceSignal.addEventListener("abort", resolve));
        signals.push("SIGKILL");
      });
      // Caught: the test may end (and stop the client) before the ack of session.ready arrives.
      queueMicrotask(() => void client.sessionReady(session.id).catch(() => {}));
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    const call = session.tools.bash.call({ command: "sleep 1000" });
    await running;
    const stopped = session.stop("user_stop", { graceMs: 3_000 });
    await until(() => signals.length === 2, "SIGTERM");
    assert.deepEqual(signals, ["stop:ses_1:user_stop", "SIGTERM after user_stop, grace 3000"]);
    assert.equal((await call).outcome, "canceled");
    assert.ok(callAborted);
    await clock.advance(2_999);
    assert.equal(signals.length, 2, "no SIGKILL before the grace period is over");
    assert.equal(session.state, "stopping");
    await clock.advance(1);
    assert.deepEqual(await stopped, { reason: "user_stop" });
    assert.equal(signals[2], "SIGKILL");
    assert.equal(client.session("ses_1"), undefined);
  });

  it("a stop handler that never returns does not keep client.stop() from resolving", async () => {
    const clock = new ManualClock();
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server, { clock, sessionGraceMs: 1_000, cleanupTimeoutMs: 1_000 });
    let handlerRan!: () => void;
    const ran = new Promise<void>((resolve) => (handlerRan = resolve));
    client.onSessionStop(() => {
      handlerRan();
      return new Promise<void>(() => {}); // a user handler that hangs
    });
    client.tools.bash.handle(() => "ok");
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    void session.stop("user_stop").catch(() => {});
    await ran;
    let stopped = false;
    const stopping = client.stop().then((info) => {
      stopped = true;
      return info;
    });
    // The session's own end (session.stop) is held by the handler; the client's stop is bounded
    // by the grace period plus the cleanup timeout of the clock it was given.
    await clock.advance(1_999);
    assert.equal(stopped, false);
    await clock.advance(1);
    assert.equal((await stopping).reason, "stopped");
  });

  it("retries session.ended until accepted", async () => {
    const harness = await ScriptedHarness.start();
    scripted.push(harness);
    const { client } = fx.client(harness);
    await client.start();
    await harness.last.peer.call("session.assign", { session_id: "ses_1" });
    let attempts = 0;
    harness.on("session.ended", () => {
      if (++attempts < 3) throw new UnavailableError("later", { reason: "backend_unavailable" });
      return { ok: true };
    });
    await client.sessionEnded("ses_1", "work_done");
    const ended = harness.requests("session.ended");
    assert.equal(ended.length, 3);
    assert.deepEqual(ended[2].params, { session_id: "ses_1", reason: "work_done" });
    assert.equal(client.session("ses_1"), undefined);
  });

  it("ends a one-shot session (metadata.source not harness) after its tool call", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    client.tools.bash.handle(() => "one");
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({
      session_id: "ses_once",
      metadata: { source: "api" },
    });
    assert.equal(client.session("ses_once")?.oneShot, true);
    const result = await session.tools.bash.call({ command: "x" });
    assert.equal(result.outcome, "completed");
    assert.deepEqual(await session.ended, { reason: "one_shot_done" });
    assert.equal(client.session("ses_once"), undefined);
  });

  it("refuses new sessions while draining but lets current work finish", async () => {
    const { harness, server } = await fx.harness();
    const { client } = fx.client(server);
    const drains: unknown[] = [];
    client.onDrain((info) => void drains.push(info));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    client.tools.bash.handle(async () => {
      await released;
      return "finished";
    });
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_1" });
    await session.ready();
    const call = session.tools.bash.call({ command: "long" });
    const drained = await executor.drain({ reason: "deploy", deadline_ms: 60_000 });
    assert.deepEqual(drained, { active_sessions: ["ses_1"] });
    await until(() => drains.length === 1);
    assert.deepEqual(drains, [{ source: "request", reason: "deploy", deadlineMs: 60_000 }]);
    assert.equal(client.draining, true);
    // The executor itself refuses: ask it directly, past the harness's own drain check.
    const refused = await executor.request("session.assign", { session_id: "ses_2" })
      .then(() => undefined, (e) => e);
    assert.ok(refused instanceof UnavailableError, String(refused));
    assert.equal(refused.reason, "draining");
    release();
    const result = await call;
    assert.equal(result.outcome, "completed");
    assert.deepEqual(result.content, [{ type: "text", text: "finished" }]);
  });
});
