/**
 * Deadlines of the edge harness on its single alarm, with a short heartbeat interval and short
 * token lifetime set through the Worker's environment: the lease (two missed heartbeats: close
 * 4005, pending calls fail), the token deadline (close 4001) and `executor.token.refresh`
 * moving it. Each test waits for the outcome; none asserts how long it took.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../executor/node.ts";
import { Edge, gate, registerParams, until } from "./edge-fixture.ts";

describe("edge harness on workerd: leases and token deadlines", { timeout: 90_000 }, () => {
  let edge: Edge;
  before(async () => {
    edge = await Edge.start({
      vars: { BMA_HEARTBEAT_INTERVAL_MS: "400", BMA_TOKEN_TTL_SECONDS: "3" },
    });
  });
  afterEach(() => edge.stopClients());
  after(() => edge.dispose());

  it("expires the lease after two missed heartbeats: 4005, and the pending call fails", async () => {
    // The executor's own clock stands still: it never heartbeats (nor reconnects).
    const client = edge.client({ clock: new ManualClock() });
    const running = gate();
    client.tools.bash.handle(() => {
      running.open();
      return new Promise(() => {});
    });
    const states: string[] = [];
    client.onStateChange((state) => void states.push(state));
    const { executor_id } = await client.start();
    const assigned = await edge.brain("POST", "/sessions", {
      session_id: "ses_lease",
      executor_id,
    });
    assert.equal(assigned.status, 201, JSON.stringify(assigned.body));
    await edge.brain("POST", "/sessions/ses_lease/tool-calls", {
      tool: "bash",
      input: { command: "forever" },
      tool_call_id: "call_lease",
    });
    await running.promise;
    const failed = await edge.brain("GET", "/tool-calls/call_lease?wait_ms=30000");
    assert.equal(failed.status, 200, "the call ended");
    assert.equal(failed.body.error.code, "tool_outcome_unknown");
    assert.equal(failed.body.error.data.reason, "lease_expired");
    const session = await edge.brain("GET", "/sessions/ses_lease");
    assert.equal(session.body.state, "ended");
    assert.equal(session.body.end_reason, "lease_expired");
    const gone = await edge.brain("GET", `/executors/${executor_id}`);
    assert.equal(gone.status, 404, "the executor is gone");
    const feed = await edge.brain("GET", "/executor-events");
    assert.deepEqual(
      feed.body.events.filter((e: any) => e.executor_id === executor_id)
        .map((e: any) => [e.type, e.reason]),
      [["registered", undefined], ["gone", "lease_expired"]],
    );
    await until(() => states.includes("waiting"), "the client saw its connection closed");
  });

  it("closes a silent raw connection with 4005 once its lease expires", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token);
    await raw.opened;
    const registered = await raw.call("executor.register", registerParams());
    assert.equal(registered.result.heartbeat_interval_ms, 400);
    const closed = await raw.closed;
    assert.equal(closed.code, 4005);
    assert.equal(closed.reason, "lease expired");
  });

  it("closes with 4001 when the token expires, and a rejected refresh leaves the deadline", async () => {
    const { token } = await edge.token();
    const raw = edge.raw(token);
    await raw.opened;
    const registered = await raw.call("executor.register", registerParams());
    assert.ok(registered.result, JSON.stringify(registered));
    // Heartbeats keep the lease alive, so the token deadline is what ends the connection.
    const beat = setInterval(() => {
      raw.ws.send(JSON.stringify({ jsonrpc: "2.0", method: "executor.heartbeat", id: "hb" }));
    }, 100);
    try {
      const garbage = await raw.call("executor.token.refresh", { token: "not-a-jwt" });
      assert.equal(garbage.error.code, -32001);
      assert.equal(garbage.error.data.reason, "token_invalid");
      const other = await edge.token(true);
      const mismatch = await raw.call("executor.token.refresh", { token: other.token });
      assert.equal(mismatch.error.data.reason, "token_mismatch");
      const closed = await raw.closed;
      assert.equal(closed.code, 4001);
      assert.equal(closed.reason, "token expired");
    } finally {
      clearInterval(beat);
    }
  });

  it("keeps the connection past its first token's expiry with executor.token.refresh", async () => {
    const client = edge.client();
    client.tools.bash.handle(() => "ok");
    const states: string[] = [];
    const { executor_id } = await client.start();
    client.onStateChange((state) => void states.push(state));
    const first = await edge.brain("GET", `/executors/${executor_id}`);
    const firstDeadline = Date.parse(first.body.token_expires_at);
    const connection = first.body.connection_id;
    await until(async () => {
      const view = await edge.brain("GET", `/executors/${executor_id}`);
      return Date.parse(view.body.token_expires_at) > firstDeadline;
    }, "a refreshed token moved the deadline");
    // Past the first token's expiry the same connection still serves.
    await until(() => Date.now() > firstDeadline + 500, "the first token's expiry has passed");
    const later = await edge.brain("GET", `/executors/${executor_id}`);
    assert.equal(later.body.connected, true);
    assert.equal(later.body.connection_id, connection, "no reconnect");
    assert.deepEqual(states, [], "the client never left the connection");
  });
});
