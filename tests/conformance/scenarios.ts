/**
 * The conformance scenarios: each runs against one cell of the matrix (an executor on some
 * runtime, a harness on some runtime, a transport, a direction) through the agents' JSON
 * methods only, so the same scenario code judges every pairing, the Workers harness included.
 *
 * A scenario gets a {@linkcode ScenarioContext}: `connect()` brings up an executor behind a
 * {@linkcode Link} (a proxy the scenario can cut or hold) in the cell's direction — the executor
 * dials the harness, or listens while the harness dials it — and waits until the harness holds
 * it. Everything a scenario starts is cleaned up by the context.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import type { ClientSpec, ExecutorAgent } from "./executor-agent.ts";
import type { HarnessAgent, HarnessSpec } from "./harness-agent.ts";
import { type Endpoint, endpointOf, Link } from "./link.ts";
import { rawHarness } from "./raw-harness.ts";
import type { AgentProcess, Remote } from "./rpc.ts";

/** How a cell connects its two ends. */
export type Direction = "dial" | "listen";

/** What a scenario works with. */
export interface ScenarioContext {
  /** The harness side. */
  readonly H: Remote<HarnessAgent>;
  /** The executor side. */
  readonly E: Remote<ExecutorAgent>;
  /** `dial`: the executor dials the harness; `listen`: the harness dials the executor. */
  readonly direction: Direction;
  /** How the executor reaches the harness (dial direction). */
  readonly transport: "ws" | "unix";
  /** The scenario's temp directory. */
  readonly dir: string;
  /**
   * A harness agent in a process of its own, on the cell's harness runtime, for scenarios that
   * kill it; killed or stopped with the scenario.
   */
  spawnHarness(): Promise<AgentProcess<HarnessAgent>>;
  /** A link (a cuttable proxy) to `target`, closed with the scenario. */
  link(target: Endpoint): Promise<Link>;
  /** Starts an executor client dialing `url` (stopped with the scenario); returns its id. */
  startExecutor(name: string, url: string): Promise<string>;
  /** The harness of this scenario (created on first use, with `harnessSpec`). */
  harness(spec?: Partial<HarnessSpec>): Promise<string>;
  /** The URL executors dial (dial direction), straight to the harness, no link. */
  harnessUrl(): Promise<string>;
  /** Brings up an executor behind a link and waits until the harness holds it. */
  connect(name: string, spec?: Partial<ClientSpec>): Promise<Connected>;
  /** Starts a listening executor without dialing it (for a raw harness); returns its URL. */
  listen(name: string, spec?: Partial<ClientSpec>): Promise<{ client: string; url: string }>;
  /** A fresh socket path in the scenario's temp directory. */
  socketPath(label: string): string;
  /** A name unique to this scenario run (counters are shared by an agent's cells). */
  key(label: string): string;
  /**
   * How the harness is evicted, for a harness whose restart is an eviction (the Workers cell's
   * Durable Object); the restart row then takes that form.
   */
  readonly eviction?: Eviction;
}

/** An executor brought up by {@linkcode ScenarioContext.connect}. */
export interface Connected {
  /** The executor agent's id of the client. */
  readonly client: string;
  /** The link between the two ends. */
  readonly link: Link;
  /** The executor id the harness gave it. */
  readonly executorId: string;
}

/** One scenario. */
export interface Scenario {
  readonly name: string;
  /** Why it does not apply to an external cell (the Workers harness), when it does not. */
  readonly external?: string;
  /** Its timeout, when longer than the suite's default. */
  readonly timeoutMs?: number;
  run(ctx: ScenarioContext): Promise<void>;
}

/** Polls `probe` until it returns true (the test's own timeout bounds the wait). */
export async function until(probe: () => Promise<boolean>): Promise<void> {
  while (!(await probe())) await new Promise((resolve) => setTimeout(resolve, 5));
}

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
  {
    name: "harness restart (kill -9 on SQLite; eviction on Workers)",
    timeoutMs: 90_000,
    async run(ctx) {
      if (ctx.eviction) return await restartEvicted(ctx, ctx.eviction);
      if (ctx.direction === "listen") return await restartListening(ctx);
      const store = join(ctx.dir, `${ctx.key("store")}.db`);
      const spec = () => ({
        serve: ctx.transport,
        store,
        heartbeatIntervalMs: 2_000,
        ...(ctx.transport === "unix" ? { path: ctx.socketPath("harness") } : {}),
      });
      // The first harness, in a process of its own on the cell's harness runtime.
      const first = await ctx.spawnHarness();
      const created = await first.remote.create(spec());
      const link = await ctx.link(endpointOf(created.url!));
      const client = await ctx.startExecutor("e1", link.url);
      await first.remote.waitEvent(created.id, "registered", "e1");
      await first.remote.assign(created.id, "e1", "s1");
      await ctx.E.sendEvents(client, "s1", 5, 1);
      const key = ctx.key("restart");
      const call = {
        tool: "bash",
        input: { command: `count ${key} 1000` },
        tool_call_id: "call_r",
      };
      first.remote.call(created.id, "s1", call).catch(() => {});
      await until(async () => (await ctx.E.counter(key)) === 1);

      // kill -9 while the call runs; then 20 events, none acknowledged.
      await first.kill();
      const acks = ctx.E.sendEvents(client, "s1", 20, 6);

      const second = await ctx.spawnHarness();
      const again = await second.remote.create(spec());
      link.retarget(endpointOf(again.url!));
      assert.equal(await second.remote.recovered(again.id, "s1"), "ready");
      assert.equal(await acks, 20, "every event accepted by the restarted harness");
      await second.remote.waitEvent(again.id, "reconnected", "e1");
      const { result } = await second.remote.call(again.id, "s1", call);
      assert.equal(result.outcome, "completed");
      assert.deepEqual(result.structured_content, { stdout: "1", stderr: "", exit_code: 0 });
      assert.equal(await ctx.E.counter(key), 1, "the call ran once");
      const events = await second.remote.events(again.id, "s1", 25);
      assert.deepEqual(
        events.map((e) => (e as { n: number }).n),
        Array.from({ length: 25 }, (_, i) => i + 1),
        "every event once, in order",
      );
    },
  },
];

/** A harness that can be evicted (the Workers cell: a Durable Object). */
export interface Eviction {
  /** Starts a call that only the harness's own brain awaits (no request of the suite stays open). */
  startCall(h: string, session: string, call: unknown): Promise<void>;
  /** Resolves once the harness was evicted and a new incarnation answers. */
  evict(h: string): Promise<void>;
}

/**
 * The restart row on a Durable Object harness: evicted, its in-memory state dropped, while a
 * call runs and the executor's events wait unacknowledged; the new incarnation takes the socket
 * back from its attachment, and the brain repeats the call with its `tool_call_id`.
 */
async function restartEvicted(ctx: ScenarioContext, harness: Eviction): Promise<void> {
  // Heartbeats far apart: the object must idle long enough to be evicted.
  const h = await ctx.harness({ heartbeatIntervalMs: 30_000 });
  const e = await ctx.connect("e1");
  await ctx.H.assign(h, "e1", "s1");
  await ctx.E.sendEvents(e.client, "s1", 5, 1);
  const key = ctx.key("restart");
  const call = { tool: "bash", input: { command: `count ${key} 1000` }, tool_call_id: "call_r" };
  await harness.startCall(h, "s1", call);
  await until(async () => (await ctx.E.counter(key)) === 1);
  // Nothing reaches the harness now: the result and 20 events wait, unacknowledged.
  e.link.hold();
  const acks = ctx.E.sendEvents(e.client, "s1", 20, 6);
  await harness.evict(h);
  e.link.release();
  assert.equal(await ctx.H.recovered(h, "s1"), "ready");
  assert.equal(await acks, 20, "every event accepted by the new incarnation");
  const { result } = await ctx.H.call(h, "s1", call);
  assert.equal(result.outcome, "completed");
  assert.deepEqual(result.structured_content, { stdout: "1", stderr: "", exit_code: 0 });
  assert.equal(await ctx.E.counter(key), 1, "the call ran once");
  const events = await ctx.H.events(h, "s1", 25);
  assert.deepEqual(
    events.map((event) => (event as { n: number }).n),
    Array.from({ length: 25 }, (_, i) => i + 1),
    "every event once, in order",
  );
}

/** The restart row in a cell where the harness dials: the restarted harness dials again. */
async function restartListening(ctx: ScenarioContext): Promise<void> {
  const store = join(ctx.dir, `${ctx.key("store")}.db`);
  const first = await ctx.spawnHarness();
  const created = await first.remote.create({ serve: "none", store, heartbeatIntervalMs: 2_000 });
  const { client, url } = await ctx.listen("e1");
  await first.remote.dial(created.id, url);
  await ctx.E.registered(client);
  await first.remote.waitEvent(created.id, "registered", "e1");
  await first.remote.assign(created.id, "e1", "s1");
  await ctx.E.sendEvents(client, "s1", 3, 1);
  const key = ctx.key("restart");
  const call = { tool: "bash", input: { command: `count ${key} 800` }, tool_call_id: "call_l" };
  first.remote.call(created.id, "s1", call).catch(() => {});
  await until(async () => (await ctx.E.counter(key)) === 1);
  await first.kill();
  const acks = ctx.E.sendEvents(client, "s1", 10, 4);
  const second = await ctx.spawnHarness();
  const again = await second.remote.create({ serve: "none", store, heartbeatIntervalMs: 2_000 });
  assert.equal(await second.remote.recovered(again.id, "s1"), "ready");
  await second.remote.dial(again.id, url);
  assert.equal(await acks, 10);
  const { result } = await second.remote.call(again.id, "s1", call);
  assert.deepEqual(result.structured_content, { stdout: "1", stderr: "", exit_code: 0 });
  assert.equal(await ctx.E.counter(key), 1);
  const events = await second.remote.events(again.id, "s1", 13);
  assert.deepEqual(
    events.map((e) => (e as { n: number }).n),
    Array.from({ length: 13 }, (_, i) => i + 1),
  );
}

/** Builds the context of one scenario run; `dispose` cleans up everything it started. */
export function scenarioContext(options: {
  H: Remote<HarnessAgent>;
  E: Remote<ExecutorAgent>;
  direction: Direction;
  transport: "ws" | "unix";
  dir: string;
  prefix: string;
  eviction?: Eviction;
  spawnHarness: () => Promise<AgentProcess<HarnessAgent>>;
}): ScenarioContext & { dispose(): Promise<void> } {
  const { H, E, direction, transport, dir, prefix, eviction } = options;
  const spawned: AgentProcess<HarnessAgent>[] = [];
  let harness: Promise<{ id: string; url?: string; connect?: Partial<ClientSpec> }> | undefined;
  const links: Link[] = [];
  const clients: string[] = [];
  let n = 0;
  const socketPath = (label: string) => join(dir, `${prefix}-${label}-${++n}.sock`);
  const ensure = (spec: Partial<HarnessSpec> = {}) => {
    harness ??= H.create({
      serve: direction === "listen" ? "none" : transport,
      ...(direction === "dial" && transport === "unix" ? { path: socketPath("harness") } : {}),
      ...spec,
    });
    return harness;
  };
  return {
    H,
    E,
    direction,
    transport,
    dir,
    ...(eviction ? { eviction } : {}),
    async spawnHarness() {
      const agent = await options.spawnHarness();
      spawned.push(agent);
      return agent;
    },
    async startExecutor(name, url) {
      const client = `${prefix}-${name}`;
      clients.push(client);
      await E.start(client, { name, url });
      return client;
    },
    async link(target) {
      const link = await Link.open(
        target,
        transport === "unix" ? { path: socketPath("link") } : undefined,
      );
      links.push(link);
      return link;
    },
    socketPath,
    key: (label) => `${prefix}-${label}`,
    async listen(name, spec = {}) {
      const created = await ensure();
      const client = `${prefix}-${name}`;
      clients.push(client);
      const { url } = await E.listen(client, {
        name,
        path: socketPath("exec"),
        ...created.connect,
        ...spec,
      });
      return { client, url };
    },
    harness: async (spec) => (await ensure(spec)).id,
    harnessUrl: async () => (await ensure()).url!,
    async connect(name, spec = {}) {
      const created = await ensure();
      const client = `${prefix}-${name}`;
      let link: Link;
      if (direction === "dial") {
        link = await Link.open(
          endpointOf(created.url!),
          transport === "unix" ? { path: socketPath("link") } : undefined,
        );
        links.push(link);
        clients.push(client);
        await E.start(client, { name, url: link.url, ...created.connect, ...spec });
      } else {
        const path = socketPath("exec");
        clients.push(client);
        await E.listen(client, { name, path, ...created.connect, ...spec });
        link = await Link.open({ path }, { path: socketPath("link") });
        links.push(link);
        await H.dial(created.id, link.url);
        await E.registered(client);
      }
      const view = await H.waitEvent(created.id, "registered|reconnected", name);
      return { client, link, executorId: view.id };
    },
    async dispose() {
      await Promise.all(clients.map((c) => E.stop(c).catch(() => {})));
      await Promise.all(spawned.map((a) => a.stop().catch(() => {})));
      if (harness) await H.close((await harness).id).catch(() => {});
      await Promise.all(links.map((l) => l.close()));
    },
  };
}
