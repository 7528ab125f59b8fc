/**
 * A store outage and an executor reconnect at once (the store down, the executor's connection
 * cut): the register is refused (-32004) while the store fails, the executor's lease runs out
 * while a retried register waits on the store, and the store then takes that register. The
 * registration must leave the executor listed, connected and usable (a new session is assigned
 * and ready), never bound to the record the lease expiry released; its session ended with the
 * lease stays readable with its events; and the store ends up without the released executor,
 * so a harness started on it does not take that session as live.
 *
 * A real `ExecutorClient` over a WebSocket on 127.0.0.1, through a TCP proxy that cuts its
 * connection; the harness's clock is a ManualClock (the lease expires when the test says); the
 * store is a memory store whose writes fail, or wait, while the test says.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  createLinkedTransportPair,
  ExecutorClient,
  Harness,
  type HarnessStore,
  ManualClock,
  MemoryHarnessStore,
  type SessionEventRecord,
  type StoreOp,
} from "../../node.ts";
import { ChaosProxy } from "../helpers/chaos-proxy.ts";
import { ExecutorPeer, registerParams, turns } from "../helpers/executor-peer.ts";
import { until } from "../helpers/executor-fixture.ts";

const INTERVAL = 1_000;
const LEASE = 2 * INTERVAL;
const INFO = { name: "outage-executor", os: "linux", arch: "amd64", version: "0.0.1" };
const PROTOCOL = "bma.executor.v1.1";
const FAST = { initialDelayMs: 5, maxDelayMs: 20 };

type Mode = "ok" | "fail" | "hold";

/**
 * A memory store (JSON values, as a database keeps them) whose writes, while told, throw what a
 * lost database connection throws (`fail`) or wait until `resume()` (`hold`: applied then, in
 * the order they were called, as a database's queue would). Reads answer from what is applied.
 */
class OutageStore implements HarnessStore {
  readonly inner = new MemoryHarnessStore({ values: "json" });
  // One writer: the test is about the outage, not the claim's renewals.
  readonly singleWriter = true;
  mode: Mode = "ok";
  failed = 0;
  readonly held: { batch: readonly StoreOp[]; done: () => void }[] = [];

  get<T>(key: string) {
    return this.inner.get<T>(key);
  }
  list<T>(prefix: string, options?: Parameters<HarnessStore["list"]>[1]) {
    return this.inner.list<T>(prefix, options);
  }
  write(batch: readonly StoreOp[]) {
    if (this.mode === "fail") {
      this.failed++;
      throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432"), {
        code: "ECONNREFUSED",
      });
    }
    if (this.mode === "hold" || this.held.length > 0) {
      return new Promise<void>((resolve) => this.held.push({ batch, done: resolve }));
    }
    return this.inner.write(batch);
  }
  /** Writes from now on are applied at once; the held ones first, in order. */
  resume(): void {
    this.mode = "ok";
    for (const { batch, done } of this.held.splice(0)) {
      this.inner.write(batch);
      done();
    }
  }
  /**
   * Whether a held write records executor `id` as connected: what its register writes (a
   * disconnect writes it `detached`).
   */
  holdsRegister(id: string): boolean {
    return this.held.some(({ batch }) =>
      batch.some((op) =>
        "put" in op && op.put === `x/${id}` && !(op.value as { detached?: true }).detached
      )
    );
  }
}

describe("a store outage with an executor reconnect", { timeout: 30_000 }, () => {
  const closing: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close().catch(() => {});
  });

  /**
   * A harness on an {@linkcode OutageStore} with a ManualClock, an executor registered through
   * a proxy that cuts its connection, and a ready session `ses_before` on it.
   */
  /** A harness on an {@linkcode OutageStore} and a ManualClock, closed after the test. */
  function outageHarness(registerTimeoutMs?: number) {
    const store = new OutageStore();
    const clock = new ManualClock();
    const harness = new Harness({
      store,
      clock,
      insecureNoAuth: true,
      heartbeatIntervalMs: INTERVAL,
      ...(registerTimeoutMs !== undefined ? { registerTimeoutMs } : {}),
    });
    closing.push(() => harness.close());
    return { store, clock, harness };
  }

  async function rig(registerTimeoutMs?: number) {
    const { store, clock, harness } = outageHarness(registerTimeoutMs);
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    closing.push(() => server.close());
    const proxy = await ChaosProxy.start(server.url);
    closing.push(() => proxy.close());
    const client = new ExecutorClient({
      harnessUrl: proxy.url + new URL(server.url).pathname,
      executor: INFO,
      reconnect: FAST,
      retry: FAST,
    });
    closing.push(() => client.stop());
    let stopped = false;
    client.closed.then(() => (stopped = true));
    await client.start();
    const firstId = client.executorId!;
    const handle = await harness.waitExecutor();
    const session = await handle.assignSession({ session_id: "ses_before" });
    await session.ready();
    /** The client stopped for good (it takes some closes as final). */
    const isStopped = () => stopped;
    return { store, clock, harness, server, proxy, client, firstId, session, isStopped };
  }

  it("a register the store takes after the lease expired leaves a listed, usable executor", async () => {
    const { store, clock, harness, server, proxy, client, firstId, session, isStopped } =
      await rig();
    // An event acknowledged before the outage.
    await client.call("session.event", { session_id: "ses_before", event: { type: "tick", n: 1 } });

    // The store goes down, then the executor's connection is cut: its register is refused.
    store.mode = "fail";
    proxy.cut();
    await until(() => harness.executor(firstId)?.connected === false, "disconnected");
    const failedBefore = store.failed;
    await until(() => store.failed > failedBefore + 1, "a register refused while the store fails");
    assert.equal(client.connected, false);

    // A retried register now waits on the store; meanwhile the lease runs out, and what the
    // release writes is lost (the store still fails then).
    store.mode = "hold";
    await until(() => store.holdsRegister(firstId), "a register waiting on the store");
    store.mode = "fail";
    await clock.advance(LEASE + 1);
    assert.equal(harness.executor(firstId), undefined, "the lease expired");
    assert.equal(session.state, "ended");

    // The store answers again: the waiting register is recorded.
    store.resume();
    await until(() => client.connected || isStopped(), "the executor is registered again");
    assert.equal(isStopped(), false, "the executor was not turned away for good");
    const id = client.executorId!;
    const listed = harness.executors.filter((e) => e.connected && !e.gone);
    assert.deepEqual(
      listed.map((e) => e.id),
      [id],
      "the registered executor is listed and connected",
    );
    const again = await harness.executor(id)!.assignSession({ session_id: "ses_after" });
    await again.ready();
    assert.equal(again.state, "ready", "a new session is assigned to it");

    // The session the lease ended stays readable, ended, with its event.
    const ended = harness.session("ses_before");
    assert.ok(ended, "the ended session is readable");
    assert.equal(ended.state, "ended");
    const events: SessionEventRecord[] = [];
    for await (const record of ended.events({ from: 0 })) events.push(record);
    assert.deepEqual(events.map((e) => (e.event as { n?: number }).n), [1]);

    // The store does not keep the released executor: a harness started on it does not take
    // the session as live on it.
    await until(() => store.held.length === 0, "writes applied");
    if (id !== firstId) {
      assert.equal(store.inner.get(`x/${firstId}`), undefined, "the released executor's record");
    }
    await server.close();
    await harness.close();
    const next = new Harness({ store, clock, insecureNoAuth: true, takeover: true });
    closing.push(() => next.close());
    await next.ready;
    assert.equal(next.executor(firstId), undefined, "the released executor is not read back");
    assert.equal(next.session("ses_before")?.state, "ended", "nor its session, as live");
  });

  it("a register waiting on the store is not closed as never registered", async () => {
    const { store, clock, harness } = outageHarness(INTERVAL / 2);
    // A raw executor over an in-process transport: a close reaches it within a few turns.
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
    await harness.accept(harnessEnd);
    const executor = new ExecutorPeer(executorEnd);
    let closedWith: number | undefined;
    executor.peer.closed.then((info) => (closedWith = info.code));
    store.mode = "hold";
    const registered = executor.start(registerParams());
    await until(() => store.held.length > 0, "a register waiting on the store");
    await clock.advance(INTERVAL);
    await turns();
    assert.equal(closedWith, undefined, "not closed (1008) while its register is recorded");
    store.resume();
    const { executor_id } = await registered;
    assert.equal(harness.executor(executor_id)?.connected, true);
  });

  it("a register whose connection closed while the store recorded it leaves no ghost connection", async () => {
    const { store, harness, proxy, client, firstId, session } = await rig();
    store.mode = "hold";
    proxy.cut();
    await until(() => store.holdsRegister(firstId), "a register waiting on the store");
    // Its connection goes too; the executor's next registers are refused meanwhile.
    store.mode = "fail";
    const failedBefore = store.failed;
    proxy.cut();
    await until(() => store.failed > failedBefore, "a later register refused");
    store.resume();
    // The recorded register is taken before the executor can try again (no task runs between).
    for (let i = 0; i < 100; i++) await Promise.resolve();
    assert.equal(
      harness.executor(firstId)?.connected,
      false,
      "not connected through a closed connection",
    );
    await until(() => client.connected, "the executor registered again");
    assert.equal(client.executorId, firstId, "it resumed within its lease");
    assert.equal(harness.executor(firstId)?.connected, true);
    assert.equal(session.state, "ready", "its session resumed");
  });
});
