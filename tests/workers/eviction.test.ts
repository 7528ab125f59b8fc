/**
 * The Durable Object is evicted between two messages of a tool call (its `tool.call` ack and
 * its `tool.result`), and the call still completes: the object keeps its state in storage and
 * socket attachments, not in fields. workerd evicts an idle object after about ten seconds
 * while its hibernated sockets stay open; the brain API's `/status` names the in-memory
 * instance, so the test sees the eviction happen instead of assuming it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Edge, gate, until } from "./edge-fixture.ts";

/** Longer than workerd's idle time before it evicts an object. */
const IDLE_MS = 11_000;

describe("edge harness on workerd: eviction", { timeout: 150_000 }, () => {
  let edge: Edge;
  before(async () => {
    // Heartbeats far apart, so the object can be idle long enough to be evicted.
    edge = await Edge.start({ vars: { BMA_HEARTBEAT_INTERVAL_MS: "30000" } });
  });
  after(() => edge.dispose());

  it("completes a tool call whose result arrives after the object was evicted", async () => {
    const client = edge.client();
    const running = gate();
    const release = gate();
    client.tools.bash.handle(async (input) => {
      running.open();
      await release.promise;
      return { stdout: `after eviction: ${input.command}`, stderr: "", exit_code: 0 };
    });
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    const { executor_id } = await client.start();
    const assigned = await edge.brain("POST", "/sessions", {
      session_id: "ses_evict",
      executor_id,
    });
    assert.equal(assigned.status, 201);
    await edge.brain("POST", "/sessions/ses_evict/tool-calls", {
      tool: "bash",
      input: { command: "work" },
      tool_call_id: "call_evict",
    });
    await running.promise;
    // The first message of the call: the executor's ack, applied by this instance.
    await until(
      async () => (await edge.brain("GET", "/tool-calls/call_evict")).body.state === "dispatched",
      "the ack of tool.call",
    );
    const before = (await edge.brain("GET", "/status")).body.instance;

    // Stay away until a request finds a new instance (each look wakes the object again).
    let now = before;
    while (now === before) {
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
      now = (await edge.brain("GET", "/status")).body.instance;
    }

    // The second message: tool.result, served by an instance that never saw the call.
    release.open();
    const settled = await edge.brain("GET", "/tool-calls/call_evict?wait_ms=20000");
    assert.equal(settled.status, 200, JSON.stringify(settled.body));
    assert.equal(settled.body.result.outcome, "completed");
    assert.equal(settled.body.result.structured_content.stdout, "after eviction: work");
    assert.notEqual((await edge.brain("GET", "/status")).body.instance, before);

    // The lease, the connection and the session survived with it.
    const executor = await edge.brain("GET", `/executors/${executor_id}`);
    assert.equal(executor.body.connected, true);
    assert.ok(Date.parse(executor.body.lease_expires_at) > Date.now());
    const session = await edge.brain("GET", "/sessions/ses_evict");
    assert.equal(session.body.state, "ready");
    const again = await edge.brain("POST", "/sessions/ses_evict/tool-calls?wait_ms=20000", {
      tool: "bash",
      input: { command: "next" },
    });
    assert.equal(again.body.result.structured_content.stdout, "after eviction: next");
  });
});
