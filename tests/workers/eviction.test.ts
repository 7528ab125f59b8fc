/**
 * The Durable Object is evicted between two messages of a tool call (its `tool.call` ack and
 * its `tool.result`), with its in-memory state dropped, the call awaited only by the brain
 * inside the object: the new incarnation takes the socket back from its attachment (no new
 * `executor.register`), the result lands in its store, and the brain's `callTool` repeated
 * with the `tool_call_id` resolves with it. There workerd evicts the object on its own, about
 * ten seconds after it went idle (so nothing the harness arms keeps it awake), while its
 * hibernated sockets stay open; the second test has workerd evict it at once. The object names
 * its incarnation, so the tests see the eviction happen instead of assuming it.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Edge, gate, INFO, registerParams } from "./edge-fixture.ts";

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
    let runs = 0;
    client.tools.bash.handle(async (input) => {
      runs++;
      running.open();
      await release.promise;
      return { stdout: `after eviction: ${input.command}`, stderr: "", exit_code: 0 };
    });
    client.onSessionAssign((session) => {
      queueMicrotask(() => void client.sessionReady(session.id));
    });
    const states: string[] = [];
    const { executor_id } = await client.start();
    client.onStateChange((state) => void states.push(state));
    await edge.driver("waitEvent", ["registered", INFO.name]);
    await edge.driver("assign", [INFO.name, "ses_evict"]);
    const call = { tool: "bash", input: { command: "work" }, tool_call_id: "call_evict" };
    await edge.driver("call", ["ses_evict", call], undefined, { detach: true });
    await running.promise;
    const before = await edge.instance();
    await edge.evicted();

    // The second message, tool.result, reaches an incarnation that never saw the call.
    release.open();
    assert.equal(await edge.driver("recovered", ["ses_evict"]), "ready");
    const { result } = await edge.driver("call", ["ses_evict", call]);
    assert.equal(result.outcome, "completed");
    assert.equal(result.structured_content.stdout, "after eviction: work");
    assert.equal(runs, 1, "the call ran once");
    assert.notEqual(await edge.instance(), before);

    // The connection, its lease and the session survived with it: no reconnect, no register.
    assert.deepEqual(states, [], "the client never left its connection");
    assert.equal(client.executorId, executor_id);
    const next = await edge.driver("call", ["ses_evict", {
      tool: "bash",
      input: { command: "next" },
    }]);
    assert.equal(next.result.structured_content.stdout, "after eviction: next");
  });

  it("takes every kept socket back on wake-up: a newer registration replaces it with 4004", async () => {
    // On its own: the first test's client is gone.
    await edge.stopClients();
    const { token } = await edge.token();
    const older = edge.raw(token);
    await older.opened;
    const registered = await older.call("executor.register", registerParams());
    const id = registered.result.executor_id;
    await edge.evictNow();
    // The same executor again on a new socket, in an incarnation the older one never spoke to.
    const newer = edge.raw(token);
    await newer.opened;
    const resumed = await newer.call("executor.register", {
      ...registerParams(),
      resume: { executor_id: id, active_sessions: [] },
    });
    assert.equal(resumed.result.executor_id, id);
    assert.equal((await older.closed).code, 4004, "the older connection is replaced");
    const beat = await newer.call("executor.heartbeat", {});
    assert.equal(beat.result.drain, false, "the newer one serves");
  });
});
