/**
 * The conformance row "harness restart": the harness goes away while a call runs and the
 * executor's events wait unacknowledged (kill -9 over a SQLite store, or a Durable Object's
 * eviction), and the restarted harness recovers the session, takes every event once and in
 * order, and answers the brain's repeat of the call (same `tool_call_id`) without running it twice.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { endpointOf } from "./link.ts";
import { type Eviction, type Scenario, type ScenarioContext, until } from "./scenario-context.ts";

/** The restart row, in the form the cell's harness takes. */
export const RESTART_SCENARIO: Scenario = {
  name: "harness restart (kill -9 on SQLite; eviction on Workers)",
  timeoutMs: 150_000,
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
    acks.catch(() => {}); // awaited below (a failure before that is the one reported)

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
};

/**
 * The restart row on a Durable Object harness: evicted, its in-memory state dropped, while a
 * call runs and the executor's events wait unacknowledged; the new incarnation takes the socket
 * back from its attachment, and the brain repeats the call with its `tool_call_id`.
 */
async function restartEvicted(ctx: ScenarioContext, harness: Eviction): Promise<void> {
  // Heartbeats far apart: the object must idle long enough to be evicted, and the executor's
  // lease (two intervals from its last heartbeat) must outlast the wait for the eviction with
  // its link held, which any alarm or look at the object prolongs (a lease that ran out ended
  // the session: it was not recovered).
  const h = await ctx.harness({ heartbeatIntervalMs: 300_000 });
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
  // Awaited below; a failure before that is reported, not this promise's rejection.
  acks.catch(() => {});
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
  acks.catch(() => {}); // awaited below (a failure before that is the one reported)
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
