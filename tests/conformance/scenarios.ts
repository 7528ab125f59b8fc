/**
 * The conformance scenarios: each runs against one cell of the matrix (an executor on some
 * runtime, a harness on some runtime, a transport, a direction) through the agents' JSON
 * methods only, so the same scenario code judges every pairing, the Workers harness included.
 * What a scenario works with is scenario-context.ts; the restart row is restart-scenario.ts.
 */
import assert from "node:assert/strict";
import { rawHarness } from "./raw-harness.ts";
import { RESTART_SCENARIO } from "./restart-scenario.ts";
import { type Scenario, until } from "./scenario-context.ts";

/** Runs `fn` expecting it to reject; returns the error. */
async function rejection(promise: Promise<unknown>): Promise<Error & Record<string, unknown>> {
  try {
    await promise;
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  assert.fail("expected a rejection");
}

const V11 = "bma.executor.v1.1";
const V1 = "bma.executor.v1";

/** The scenarios, in the order the table lists them. */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: "register, negotiate v1.1",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      const view = await ctx.H.executor(h, "e1");
      assert.equal(view.protocol, V11);
      assert.equal(view.id, e.executorId);
      assert.ok(view.connected);
      assert.deepEqual([...view.tools].sort(), ["bash", "conformance_echo"]);
      const status = await ctx.E.status(e.client);
      assert.equal(status.executorId, view.id);
      assert.equal(status.state, "connected");
    },
  },
  {
    name: "v1 when only v1 is offered",
    async run(ctx) {
      if (ctx.direction === "dial") {
        const report = await ctx.E.rawRegister(await ctx.harnessUrl(), [V1]);
        assert.equal(report.negotiated, V1);
        assert.equal((report.result as { protocol: string }).protocol, V1);
        return;
      }
      // The harness offers only v1: the listening executor picks it and registers with it.
      const { url } = await ctx.listen("e1");
      const report = await rawHarness(url, [V1], "accept");
      assert.equal(report.negotiated, V1);
      assert.equal(report.register?.protocol, V1);
    },
  },
  {
    name: "no common subprotocol: HTTP 400",
    async run(ctx) {
      if (ctx.direction === "dial") {
        const report = await ctx.E.rawRegister(await ctx.harnessUrl(), ["bma.executor.v0"]);
        assert.equal(report.status, 400);
        assert.equal(report.negotiated, undefined);
        return;
      }
      const { url } = await ctx.listen("e1");
      const report = await rawHarness(url, ["bma.executor.v0"], "accept");
      assert.equal(report.status, 400);
    },
  },
  {
    name: "4003 protocol mismatch",
    async run(ctx) {
      if (ctx.direction === "dial") {
        const report = await ctx.E.rawRegister(await ctx.harnessUrl(), [V11], V1);
        assert.equal(report.negotiated, V11);
        assert.equal(report.error?.code, -32010);
        assert.equal(report.close?.code, 4003);
        return;
      }
      // The harness refuses the register with -32010 and 4003: the executor stops for good.
      const { client, url } = await ctx.listen("e1");
      const report = await rawHarness(url, [V11], "mismatch");
      assert.equal(report.register?.protocol, V11);
      const closed = await ctx.E.closed(client);
      assert.equal(closed.reason, "register_refused");
      assert.equal((await ctx.E.status(client)).state, "stopped");
    },
  },
  {
    name: "tool call",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const { result } = await ctx.H.call(h, "s1", {
        tool: "bash",
        input: { command: "echo hello" },
      });
      assert.equal(result.outcome, "completed");
      assert.equal(result.is_error, false);
      assert.deepEqual(result.structured_content, { stdout: "hello", stderr: "", exit_code: 0 });
      const custom = await ctx.H.call(h, "s1", {
        tool: "conformance_echo",
        input: { a: 1 },
      });
      assert.equal(custom.result.outcome, "completed");
      assert.deepEqual(custom.result.content, [{ type: "text", text: '{"a":1}' }]);
    },
  },
  {
    name: "tool error and failure",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const error = await ctx.H.call(h, "s1", { tool: "bash", input: { command: "fail nope" } });
      assert.equal(error.result.outcome, "completed");
      assert.equal(error.result.is_error, true);
      const crash = await ctx.H.call(h, "s1", { tool: "bash", input: { command: "crash" } });
      assert.equal(crash.result.outcome, "failed");
    },
  },
  {
    name: "unserved tool refused",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const error = await rejection(ctx.H.call(h, "s1", { tool: "read", input: { path: "x" } }));
      assert.equal(error.name, "CapabilityNotAdvertisedError");
    },
  },
  {
    name: "idempotent tool_call_id",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const key = ctx.key("idem");
      const call = {
        tool: "bash",
        input: { command: `count ${key} 50` },
        tool_call_id: "call_idem",
      };
      const [a, b] = await Promise.all([ctx.H.call(h, "s1", call), ctx.H.call(h, "s1", call)]);
      const c = await ctx.H.call(h, "s1", call);
      for (const { result } of [a, b, c]) {
        assert.equal(result.outcome, "completed");
        assert.equal((result.structured_content as { stdout: string }).stdout, "1");
      }
      assert.equal(await ctx.E.counter(key), 1);
    },
  },
  {
    name: "cancel",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const key = ctx.key("count");
      const pending = ctx.H.call(h, "s1", {
        tool: "bash",
        input: { command: `count ${key} 60000` },
        tool_call_id: "call_cancel",
      });
      await until(async () => (await ctx.E.counter(key)) === 1);
      assert.deepEqual(await ctx.H.cancel(h, "s1", "call_cancel"), { canceled: true });
      const { result } = await pending;
      assert.equal(result.outcome, "canceled");
      assert.deepEqual(await ctx.H.cancel(h, "s1", "call_cancel"), { canceled: false });
    },
  },
  {
    name: "progress",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const { result, progress } = await ctx.H.call(h, "s1", {
        tool: "bash",
        input: { command: "progress 3" },
      });
      assert.equal(result.outcome, "completed");
      // Notifications sent before the result on one ordered connection arrive before it.
      assert.deepEqual(progress.map((p) => [p.message, p.progress, p.total]), [
        ["step 1", 1, 3],
        ["step 2", 2, 3],
        ["step 3", 3, 3],
      ]);
    },
  },
  {
    name: "durable events in order",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      assert.equal(await ctx.E.sendEvents(e.client, "s1", 50), 50);
      const events = await ctx.H.events(h, "s1", 50);
      assert.deepEqual(
        events.map((ev) => (ev as { n: number }).n),
        Array.from({ length: 50 }, (_, i) => i + 1),
      );
    },
  },
  {
    name: "reconnect with resume",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const key = ctx.key("count");
      const pending = ctx.H.call(h, "s1", {
        tool: "bash",
        input: { command: `count ${key} 300` },
      });
      await until(async () => (await ctx.E.counter(key)) === 1);
      e.link.cut();
      const view = await ctx.H.waitEvent(h, "reconnected", "e1");
      assert.equal(view.id, e.executorId);
      assert.deepEqual(view.sessions, ["s1"]);
      assert.equal(await ctx.H.sessionState(h, "s1"), "ready");
      // The result of the call that ran across the cut is delivered on the new connection.
      const { result } = await pending;
      assert.equal(result.outcome, "completed");
      assert.equal((result.structured_content as { stdout: string }).stdout, "1");
      assert.equal(await ctx.E.counter(key), 1);
      // And the session keeps working.
      const after = await ctx.H.call(h, "s1", { tool: "bash", input: { command: "echo again" } });
      assert.equal(after.result.outcome, "completed");
    },
  },
  {
    name: "events across a reconnect",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const sending = ctx.E.sendEvents(e.client, "s1", 200);
      await until(async () => (await ctx.H.events(h, "s1", 0)).length >= 20);
      e.link.cut();
      assert.equal(await sending, 200);
      const events = await ctx.H.events(h, "s1", 200);
      // Every event once, in order, across the cut (resent events keep their JSON-RPC ids).
      assert.deepEqual(
        events.map((ev) => (ev as { n: number }).n),
        Array.from({ length: 200 }, (_, i) => i + 1),
      );
      assert.ok((await ctx.H.eventTypes(h, "e1")).includes("reconnected"));
    },
  },
  {
    name: "4004 replacement",
    async run(ctx) {
      const machine = { environmentId: "", machineId: "m_conf", process: true };
      const first = await ctx.connect("e1", machine);
      assert.equal(first.executorId, "exec_m_conf");
      const second = await ctx.connect("e2", machine);
      assert.equal(second.executorId, "exec_m_conf");
      const closed = await ctx.E.closed(first.client);
      assert.deepEqual(closed, {
        reason: "close_code",
        code: 4004,
        error: "ConnectionClosedError",
      });
      const h = await ctx.harness();
      const view = await ctx.H.executor(h, "e2");
      assert.equal(view.id, "exec_m_conf");
      assert.ok(view.connected);
      assert.equal((await ctx.E.status(second.client)).state, "connected");
    },
  },
  {
    name: "lease expiry",
    async run(ctx) {
      const h = await ctx.harness({ heartbeatIntervalMs: 150 });
      const e = await ctx.connect("e1");
      await ctx.H.assign(h, "e1", "s1");
      const key = ctx.key("count");
      const pending = ctx.H.call(h, "s1", {
        tool: "bash",
        input: { command: `count ${key} 60000` },
      });
      await until(async () => (await ctx.E.counter(key)) === 1);
      // A dead link: nothing arrives and nothing closes, so only the lease can tell.
      e.link.hold();
      const error = await rejection(pending);
      assert.equal(error.name, "ToolOutcomeUnknownError");
      assert.equal(error.reason, "lease_expired");
      assert.deepEqual(await ctx.H.gone(h, "e1"), { reason: "lease_expired" });
      e.link.release();
      // The executor comes back as a new registration; the lost session is not resumed.
      const back = await ctx.H.waitEvent(h, "registered", "e1", 2);
      assert.notEqual(back.id, e.executorId);
      assert.deepEqual(back.sessions, []);
      await until(async () => (await ctx.E.status(e.client)).sessions.length === 0);
    },
  },
  {
    name: "drain",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const drained = await ctx.H.drain(h, "e1");
      assert.deepEqual(drained.active_sessions, ["s1"]);
      assert.deepEqual(await ctx.E.drains(e.client), [{
        source: "request",
        reason: "conformance",
      }]);
      assert.equal((await ctx.E.status(e.client)).draining, true);
      const refused = await rejection(ctx.H.assign(h, "e1", "s2"));
      assert.equal(refused.name, "SessionRefusedError");
      assert.equal(refused.reason, "draining");
      // Current work goes on.
      const { result } = await ctx.H.call(h, "s1", { tool: "bash", input: { command: "echo on" } });
      assert.equal(result.outcome, "completed");
    },
  },
  {
    name: "session stop",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const key = ctx.key("count");
      const pending = ctx.H.call(h, "s1", {
        tool: "bash",
        input: { command: `count ${key} 60000` },
      }).then((r) => r.result.outcome, (error: Error) => error.name);
      await until(async () => (await ctx.E.counter(key)) === 1);
      assert.deepEqual(await ctx.H.stop(h, "s1", "done"), { reason: "done" });
      assert.deepEqual(await ctx.E.stops(e.client), ["s1"]);
      assert.equal(await ctx.H.sessionState(h, "s1"), "ended");
      // The running call was aborted by the stop: its result says so.
      assert.equal(await pending, "canceled");
      assert.deepEqual((await ctx.E.status(e.client)).sessions, []);
    },
  },
  {
    name: "max sessions: -32009",
    async run(ctx) {
      await ctx.connect("e1", { maxSessions: 1 });
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const refused = await rejection(ctx.H.assign(h, "e1", "s2"));
      assert.equal(refused.code, -32009);
    },
  },
  {
    name: "one-shot session",
    async run(ctx) {
      await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1", { source: "api" });
      const { result } = await ctx.H.call(h, "s1", { tool: "bash", input: { command: "echo 1" } });
      assert.equal(result.outcome, "completed");
      assert.deepEqual(await ctx.H.ended(h, "s1"), { reason: "one_shot_done" });
    },
  },
  {
    name: "executor stops: executor.close",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      assert.deepEqual(await ctx.E.stop(e.client), { reason: "stopped" });
      assert.deepEqual(await ctx.H.gone(h, "e1"), { reason: "closed" });
    },
  },
  {
    name: "harness closes the executor",
    async run(ctx) {
      const e = await ctx.connect("e1");
      const h = await ctx.harness();
      await ctx.H.closeExecutor(h, "e1", "bye");
      const closed = await ctx.E.closed(e.client);
      assert.equal(closed.reason, "executor_close");
      assert.deepEqual(await ctx.H.gone(h, "e1"), { reason: "closed" });
    },
  },
  {
    name: "MCP channel",
    async run(ctx) {
      await ctx.connect("e1", { mcp: true });
      const h = await ctx.harness();
      await ctx.H.assign(h, "e1", "s1");
      const { answers, closed } = await ctx.H.mcp(h, "s1", "echo", [
        { id: 1, method: "initialize", params: { protocolVersion: "2025-06-18" } },
        { id: 2, method: "tools/call", params: { name: "echo", arguments: { a: 1 } } },
      ]);
      const [init, call] = answers as { id: number; result: Record<string, unknown> }[];
      assert.equal(init.id, 1);
      assert.deepEqual(init.result.serverInfo, { name: "echo" });
      assert.equal(call.id, 2);
      assert.deepEqual(call.result.content, [{ type: "text", text: '{"a":1}' }]);
      assert.equal(closed, "closed");
    },
  },
  {
    name: "agent turn with an approval",
    async run(ctx) {
      const h = await ctx.harness({ agent: true });
      await ctx.connect("e1", { agent: true });
      await ctx.H.startTurn(h, "e1", "s_agent", "t1", "make");
      const asked = await ctx.H.answerInteraction(h, "approved");
      assert.equal(asked.kind, "permission");
      assert.equal(asked.status, "open");
      assert.ok(asked.tool_use_id, "a permission names its tool use");
      const ended = await ctx.H.turnEnded(h, "s_agent", "t1");
      assert.equal(ended.state, "completed");
      const durable = ended.events.filter((t) => !t.startsWith("session.status_running"));
      assert.deepEqual(durable, [
        "agent.tool_use",
        "agent.tool_result",
        "agent.message",
        "session.status_idle",
      ]);
    },
  },
  RESTART_SCENARIO,
];
