/**
 * The executor lease on the injectable clock, over real WebSockets: heartbeats renew it, two
 * missed heartbeats expire it (close 4005, pending calls fail with ToolOutcomeUnknownError),
 * and within it a reconnect with `resume` reattaches sessions and pending calls.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../mod.ts";
import {
  type ExecutorEvent,
  Harness,
  type HarnessServer,
  SessionRefusedError,
  ToolOutcomeUnknownError,
} from "../../harness/node.ts";
import { ExecutorPeer, registerParams, turns, until } from "../helpers/executor-peer.ts";

const INTERVAL = 1_000;

describe("Harness: lease", { timeout: 20_000 }, () => {
  let clock: ManualClock;
  let harness: Harness;
  let server: HarnessServer;
  const peers: ExecutorPeer[] = [];

  before(async () => {
    clock = new ManualClock();
    harness = new Harness({ clock, heartbeatIntervalMs: INTERVAL, insecureNoAuth: true });
    server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
  });
  after(async () => {
    for (const peer of peers) await peer.close().catch(() => {});
    await harness.close();
    await server.close();
  });

  async function connect(params = registerParams()) {
    const peer = await ExecutorPeer.dial(server.url);
    peers.push(peer);
    const result = await peer.start(params);
    const executor = await harness.waitExecutor({ filter: (e) => e.id === result.executor_id });
    return { peer, result, executor };
  }

  it("hands out heartbeat_interval_ms and renews the lease on each heartbeat", async () => {
    const { peer, result, executor } = await connect();
    assert.equal(result.heartbeat_interval_ms, INTERVAL);
    assert.equal(Date.parse(result.lease_expires_at!), clock.now() + 2 * INTERVAL);
    for (let i = 0; i < 5; i++) {
      await clock.advance(INTERVAL);
      const beat = await peer.peer.call("executor.heartbeat", { active_sessions: [] });
      assert.equal(beat.drain, false);
      assert.equal(Date.parse(beat.lease_expires_at!), clock.now() + 2 * INTERVAL);
    }
    assert.ok(executor.connected, "executor.connected");
    assert.ok(!executor.gone, "!executor.gone");
  });

  it("expires after two missed heartbeats: close 4005, pending calls fail with ToolOutcomeUnknownError", async () => {
    const { peer, executor } = await connect();
    const session = await executor.assignSession({ session_id: "ses_expire" });
    const pending = session.callTool({ tool: "bash", input: { command: "sleep 100" } });
    const call = await peer.nextToolCall();
    assert.equal(call.session_id, "ses_expire");

    await clock.advance(2 * INTERVAL - 1);
    assert.ok(!executor.gone, "one interval and a bit without heartbeat is still within the lease");
    await clock.advance(1);
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof ToolOutcomeUnknownError, String(error));
    assert.equal(error.reason, "lease_expired");
    assert.equal(error.toolCallId, call.tool_call_id);
    assert.equal((await peer.peer.closed).code, 4005);
    assert.deepEqual(await executor.closed, { reason: "lease_expired" });
    assert.deepEqual(await session.ended, { reason: "lease_expired" });
    assert.equal(harness.executor(executor.id), undefined);
    // The executor is gone: nothing more is assigned to it.
    await assert.rejects(executor.assignSession({ session_id: "ses_late" }), SessionRefusedError);
  });

  it("within the lease, a reconnect with resume reattaches sessions and pending calls complete", async () => {
    const first = await connect();
    const executor = first.executor;
    const kept = await executor.assignSession({ session_id: "ses_kept" });
    const lost = await executor.assignSession({ session_id: "ses_lost" });
    const running = kept.callTool({ tool: "bash", input: { command: "echo one" } });
    const runningCall = await first.peer.nextToolCall();
    const orphan = lost.callTool({ tool: "bash", input: { command: "echo lost" } });
    await first.peer.nextToolCall();
    // The "registered" event goes out after the register result; let it pass first.
    await turns();
    const events: ExecutorEvent[] = [];
    const listening = harness.onExecutor((event) => events.push(event));

    // The socket dies; the executor is still held within its lease.
    await first.peer.close(1001, "network");
    await turns();
    assert.ok(!executor.connected, "!executor.connected");
    assert.ok(!executor.gone, "!executor.gone");
    // A call made while disconnected waits for the executor to come back.
    const queued = kept.callTool({ tool: "bash", input: { command: "echo two" } });
    await clock.advance(INTERVAL);

    const second = await ExecutorPeer.dial(server.url);
    peers.push(second);
    const result = await second.start(registerParams({
      resume: { executor_id: executor.id, active_sessions: ["ses_kept"] },
    }));
    assert.equal(result.executor_id, executor.id);
    assert.deepEqual(result.resumed_sessions, ["ses_kept"]);
    assert.equal(harness.executor(executor.id), executor);
    assert.ok(executor.connected, "executor.connected");

    // The session the executor no longer holds is over, and so is its call.
    const orphanError = await orphan.catch((e) => e);
    assert.ok(
      orphanError instanceof ToolOutcomeUnknownError,
      "orphanError instanceof ToolOutcomeUnknownError",
    );
    assert.equal(orphanError.reason, "session_lost");
    assert.deepEqual(await lost.ended, { reason: "lost" });

    // The queued call is dispatched on the new connection, after the register result.
    const queuedCall = await second.nextToolCall();
    assert.equal(queuedCall.session_id, "ses_kept");
    assert.deepEqual(queuedCall.input, { command: "echo two" });
    // The executor retries the result of the call that ran across the reconnect.
    await second.completeBash(runningCall, "one\n");
    await second.completeBash(queuedCall, "two\n");
    const [one, two] = await Promise.all([running, queued]);
    assert.equal(one.outcome, "completed");
    assert.deepEqual(one.structured_content, { stdout: "one\n", stderr: "", exit_code: 0 });
    assert.deepEqual(two.content, [{ type: "text", text: "two\n" }]);
    assert.equal(kept.state, "assigned");
    await turns();
    assert.deepEqual(
      events.filter((e) => e.executor === executor).map((e) => e.type),
      ["disconnected", "reconnected"],
    );
    listening.dispose();
  });

  it("after the lease expired, a reconnect with resume starts over with no sessions", async () => {
    const first = await connect();
    const executor = first.executor;
    const session = await executor.assignSession({ session_id: "ses_gone" });
    const pending = session.callTool({ tool: "bash", input: { command: "true" } });
    await first.peer.nextToolCall();
    await first.peer.close(1001, "network");
    await turns();
    await clock.advance(2 * INTERVAL);
    assert.deepEqual(await executor.closed, { reason: "lease_expired" });
    const error = await pending.catch((e) => e);
    assert.ok(error instanceof ToolOutcomeUnknownError, "error instanceof ToolOutcomeUnknownError");
    assert.equal(error.reason, "lease_expired");

    const second = await ExecutorPeer.dial(server.url);
    peers.push(second);
    const result = await second.start(registerParams({
      resume: { executor_id: executor.id, active_sessions: ["ses_gone"] },
    }));
    assert.notEqual(
      result.executor_id,
      executor.id,
      "an expired environment executor's id is not reused",
    );
    assert.deepEqual(result.resumed_sessions, []);
  });

  it("ends a stopped session on its own when session.ended never comes", async () => {
    const { peer, executor } = await connect();
    peer.peer.onRequest("session.stop", () => ({ stopping: true }));
    const session = await executor.assignSession({ session_id: "ses_stuck" });
    const stopping = session.stop("done", { timeoutMs: 500 });
    await until(() => session.state === "stopping");
    await clock.advance(499);
    assert.equal(session.state, "stopping");
    await clock.advance(1);
    assert.deepEqual(await stopping, { reason: "stop_timeout" });
    assert.equal(harness.sessions.has("ses_stuck"), false);
  });

  it("a machine executor keeps exec_<machine_id> across a reconnect", async () => {
    const first = await connect(registerParams({ environment_id: "", machine_id: "m_lease" }));
    assert.equal(first.executor.id, "exec_m_lease");
    await first.peer.close(1001, "network");
    await turns();
    const second = await ExecutorPeer.dial(server.url);
    peers.push(second);
    const result = await second.start(registerParams({
      environment_id: "",
      machine_id: "m_lease",
      resume: { executor_id: "exec_m_lease", active_sessions: [] },
    }));
    assert.equal(result.executor_id, "exec_m_lease");
    assert.equal(harness.executor("exec_m_lease"), first.executor);
  });
});
