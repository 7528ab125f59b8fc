/**
 * How a harness made again on its store sets the leases of the executors it reads back
 * (`recoveredLeases`), on an injected clock. `fresh` (a process restart): a full lease from
 * the restart. `stored` (an edge harness made anew on every wake-up of its Durable Object): an
 * executor that had disconnected continues the lease it had, and one whose record said it was
 * connected gets one full lease that the store then keeps, so an executor that never comes back
 * expires however often the harness is made again before its lease is over. A connection
 * restored from its snapshot moves the lease to the snapshot's.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  type ConnectionSnapshot,
  createLinkedTransportPair,
  fedTransport,
  Harness,
  type HarnessOptions,
  ManualClock,
  MemoryHarnessStore,
  type Transport,
} from "../../node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const INTERVAL = 1_000;
const LEASE = 2 * INTERVAL;
const PROTOCOL = "bma.executor.v1.1";

interface ExecutorRecordView {
  leaseExpiresAt?: number;
  detached?: true;
}

describe("leases of executors read back from the store", { timeout: 20_000 }, () => {
  const harnesses: Harness[] = [];
  afterEach(async () => {
    for (const harness of harnesses.splice(0)) await harness.close();
  });

  /** A harness on `store` whose deadlines run only when the test says (a sleeping alarm). */
  function harness(
    store: MemoryHarnessStore,
    clock: ManualClock,
    options: Partial<HarnessOptions> = {},
  ): Harness {
    const made = new Harness({
      store,
      // The harness made before lives on in this process: each one takes the store over.
      takeover: true,
      clock,
      heartbeatIntervalMs: INTERVAL,
      deadlines: { wake() {} },
      ...options,
    });
    harnesses.push(made);
    return made;
  }

  /** Registers a raw executor on `target`; returns its peer and executor id. */
  async function register(target: Harness) {
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
    await target.accept(harnessEnd);
    const peer = new ExecutorPeer(executorEnd);
    const { executor_id } = await peer.start(registerParams());
    return { peer, id: executor_id, harnessEnd };
  }

  function record(store: MemoryHarnessStore, id: string): ExecutorRecordView | undefined {
    return store.get<ExecutorRecordView>(`x/${id}`) as ExecutorRecordView | undefined;
  }

  it("stored: a disconnected executor keeps its lease however often the harness is made anew", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const clock = new ManualClock();
    const t0 = clock.now();
    const first = harness(store, clock, { recoveredLeases: "stored" });
    const { peer, id } = await register(first);
    await clock.advance(500);
    await peer.peer.call("executor.heartbeat", {});
    const expiry = t0 + 500 + LEASE;
    await clock.advance(100);
    peer.transport.close(1000, "gone away");
    await peer.peer.closed;
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(record(store, id)?.leaseExpiresAt, expiry, "its running lease is stored");
    assert.equal(record(store, id)?.detached, true);

    // Woken again and again (an alarm, an eviction each time) before the lease is over.
    for (const step of [900, 500, 400]) {
      await clock.advance(step);
      const again = harness(store, clock, { recoveredLeases: "stored" });
      assert.equal(
        again.executor(id)?.leaseExpiresAt,
        expiry,
        "the lease is continued, not renewed",
      );
    }
    const last = harness(store, clock, { recoveredLeases: "stored" });
    last.runDeadlines(expiry);
    assert.equal(last.executor(id), undefined, "expired at its stored expiry");
    assert.equal(record(store, id), undefined, "and forgotten in the store");
  });

  it("fresh: a harness started on the store gives a full lease from its start", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const clock = new ManualClock();
    const first = harness(store, clock);
    const { peer, id } = await register(first);
    peer.transport.close(1000, "gone away");
    await peer.peer.closed;
    await clock.advance(1_500);
    const restarted = harness(store, clock);
    assert.equal(restarted.executor(id)?.leaseExpiresAt, clock.now() + LEASE);
  });

  it("stored: an executor connected when its harness vanished gets one full lease, kept in the store", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const clock = new ManualClock();
    const first = harness(store, clock, { recoveredLeases: "stored" });
    const { id } = await register(first);
    assert.equal(record(store, id)?.detached, undefined, "recorded as connected");
    // The harness and its socket are gone at once (a crash): nothing more is written.
    await clock.advance(700);
    const woken = harness(store, clock, { recoveredLeases: "stored" });
    const expiry = clock.now() + LEASE;
    assert.equal(woken.executor(id)?.leaseExpiresAt, expiry);
    await new Promise((resolve) => queueMicrotask(() => resolve(undefined)));
    assert.equal(record(store, id)?.leaseExpiresAt, expiry, "the new lease is stored");
    assert.equal(record(store, id)?.detached, true);
    await clock.advance(1_000);
    const again = harness(store, clock, { recoveredLeases: "stored" });
    assert.equal(again.executor(id)?.leaseExpiresAt, expiry, "not renewed a second time");
  });

  it("stored: a connection restored in the same task moves the lease to its snapshot's", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const clock = new ManualClock();
    const snapshots = new Map<Transport, ConnectionSnapshot>();
    const first = harness(store, clock, {
      recoveredLeases: "stored",
      onConnectionChange: (transport, snapshot) => snapshots.set(transport, snapshot),
    });
    const { peer, id, harnessEnd } = await register(first);
    await clock.advance(800);
    await peer.peer.call("executor.heartbeat", {});
    const snapshot = JSON.parse(JSON.stringify(snapshots.get(harnessEnd)!)) as ConnectionSnapshot;
    assert.equal(snapshot.leaseExpiresAt, clock.now() + LEASE);
    await clock.advance(300);

    // Evicted while the socket lives on: made again, the socket taken back at once.
    const woken = harness(store, clock, { recoveredLeases: "stored" });
    await woken.restore(
      fedTransport({ protocol: PROTOCOL, send() {}, close() {} }),
      snapshot,
    );
    assert.equal(woken.executor(id)?.leaseExpiresAt, snapshot.leaseExpiresAt);
    assert.equal(woken.executor(id)?.connected, true);
    await new Promise((resolve) => setTimeout(resolve, 0));
    assert.equal(record(store, id)?.detached, undefined, "still recorded as connected");
  });
});
