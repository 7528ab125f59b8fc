/**
 * Deadlines of the edge harness on the object's single alarm, with a short heartbeat interval
 * and short token lifetime set through the Worker's environment: the lease (two missed
 * heartbeats: close 4005, pending calls fail), the token deadline (close 4001) and
 * `executor.token.refresh` moving it. Each test waits for the outcome; none asserts how long
 * it took.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { ManualClock } from "../../executor/node.ts";
import { type DriverError, Edge, gate, INFO, registerParams, until } from "./edge-fixture.ts";

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
    const client = edge.client({ clock: new ManualClock(), executor: { ...INFO, name: "lease" } });
    const running = gate();
    client.tools.bash.handle(() => {
      running.open();
      return new Promise(() => {});
    });
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    const states: string[] = [];
    client.onStateChange((state) => void states.push(state));
    await client.start();
    await edge.driver("waitEvent", ["registered", "lease"]);
    await edge.driver("assign", ["lease", "ses_lease"]);
    const call = { tool: "bash", input: { command: "forever" }, tool_call_id: "call_lease" };
    const failed = edge.driver("call", ["ses_lease", call]).then(
      () => assert.fail("the call cannot complete"),
      (error: DriverError) => error,
    );
    await running.promise;
    const error = await failed;
    assert.equal(error.name, "ToolOutcomeUnknownError");
    assert.equal(error.reason, "lease_expired");
    assert.deepEqual(await edge.driver("ended", ["ses_lease"]), { reason: "lease_expired" });
    assert.deepEqual(await edge.driver("gone", ["lease"]), { reason: "lease_expired" });
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
    // The client's own token is issued after this one: it expires no earlier.
    const firstExpiry = Date.parse((await edge.token()).expires_at);
    const client = edge.client({ executor: { ...INFO, name: "refresh" } });
    client.tools.bash.handle(() => "ok");
    const states: string[] = [];
    await client.start();
    client.onStateChange((state) => void states.push(state));
    // Past the first token's expiry the same connection still serves.
    await until(() => Date.now() > firstExpiry + 1_000, "the first token's expiry has passed");
    const view = await edge.driver("executor", ["refresh"]);
    assert.equal(view.connected, true);
    assert.deepEqual(await edge.driver("eventTypes", ["refresh"]), ["registered"], "no reconnect");
    assert.deepEqual(states, [], "the client never left the connection");
  });
});
