/**
 * `harness.observe(listener)`: one typed stream of what a harness does — an executor registering,
 * its lease moving, a session's states, a tool call dispatched, acknowledged, in progress and
 * settled, durable events, the executor gone — each stamped with the harness clock; nothing
 * after the listener is disposed. Real WebSocket, the executor a real ExecutorClient.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type ExecutorArrivedObservation,
  ExecutorClient,
  Harness,
  type HarnessObservation,
  ManualClock,
} from "../../node.ts";
import { until } from "../helpers/executor-fixture.ts";

const INFO = { name: "observed", os: "linux", arch: "amd64", version: "0.0.1" };

describe("Harness: observation", { timeout: 20_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  it("reports executors, sessions, tool calls and events, in the order they happen", async () => {
    const clock = new ManualClock(Date.now());
    const harness = new Harness({ insecureNoAuth: true, clock });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => harness.close(), () => server.close());
    const seen: HarnessObservation[] = [];
    const watching = harness.observe((o) => seen.push(o));

    const client = new ExecutorClient({ harnessUrl: server.url, executor: INFO, clock });
    client.tools.bash.handle((_input, ctx) => {
      ctx.progress({ message: "half", progress: 1, total: 2 });
      return { stdout: "ok", stderr: "", exit_code: 0 };
    });
    closing.push(() => client.stop());
    await client.start();
    const executor = await harness.waitExecutor();
    const session = await executor.assignSession({ session_id: "ses_obs" });
    await session.ready();
    const result = await session.callTool({
      tool: "bash",
      input: { command: "x" },
      tool_call_id: "call_obs",
    });
    await client.call("session.event", { session_id: "ses_obs", event: { type: "note" } });
    await until(() => seen.some((o) => o.type === "session.event"), "the event");
    await session.stop("done");

    const types = seen.map((o) => o.type);
    assert.equal(types[0], "executor.registered");
    const arrived = seen[0] as ExecutorArrivedObservation;
    assert.equal(arrived.executorId, executor.id);
    assert.equal(arrived.info.name, "observed");
    assert.equal(arrived.leaseExpiresAt, executor.leaseExpiresAt);
    const states = seen.filter((o) => o.type === "session.state").map((o) =>
      (o as { state: string }).state
    );
    // session.ready may overtake the assign's ack: "assigned" is then skipped.
    assert.equal(states[0], "assigning");
    assert.ok(states.includes("ready"), states.join());
    assert.equal(states.at(-1), "ended");
    const call = seen.filter((o) => "toolCallId" in o && o.toolCallId === "call_obs").map((o) =>
      o.type
    );
    // The ack and the result may come in one read: either is reported first.
    assert.equal(call[0], "tool.dispatched");
    assert.deepEqual(call.filter((t) => t !== "tool.progress").slice(1).sort(), [
      "tool.acknowledged",
      "tool.settled",
    ]);
    const settled = seen.find((o) => o.type === "tool.settled") as Extract<
      HarnessObservation,
      { type: "tool.settled" }
    >;
    assert.deepEqual(settled.result, result);
    const dispatched = seen.find((o) => o.type === "tool.dispatched") as Extract<
      HarnessObservation,
      { type: "tool.dispatched" }
    >;
    assert.equal(dispatched.tool, "bash");
    assert.deepEqual(dispatched.input, { command: "x" }, "the input as sent");
    assert.ok(seen.every((o) => o.at === clock.now()), "stamped with the harness clock");
    const event = seen.find((o) => o.type === "session.event") as Extract<
      HarnessObservation,
      { type: "session.event" }
    >;
    assert.equal(event.record.event.type, "note");

    // A heartbeat moves the lease: observed; after dispose, nothing is.
    await clock.advance(15_000);
    await until(() => seen.some((o) => o.type === "executor.lease"), "a heartbeat");
    watching.dispose();
    const count = seen.length;
    await executor.close("bye");
    assert.equal(seen.length, count, "nothing after dispose");
  });
});
