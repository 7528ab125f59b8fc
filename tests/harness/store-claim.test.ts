/**
 * The claim on a store, on injected clocks and identities (the process-level story is
 * tests/store/one-writer.test.ts): the rule of a live holder, a fenced harness finding out by
 * its renewal and closing its connections (1001), a holder that stopped renewing counting as
 * gone, a released store claimed at once, and a store that answers with promises rejecting
 * `ready` when held.
 */
import { afterEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  createLinkedTransportPair,
  Harness,
  type HarnessStore,
  type HolderIdentity,
  ManualClock,
  MemoryHarnessStore,
  STORE_FORMAT,
  StoreFencedError,
  StoreFormatError,
  StoreHeldError,
  type StoreHolderRecord,
  type StoreOp,
} from "../../node.ts";
import { holderIsLive } from "../../harness/store/claim.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";

const RENEW = 1_000;
const PROTOCOL = "bma.executor.v1.1";

function identity(host: string, pid: number, processStarted = 1, alive = true): HolderIdentity {
  return { host, pid, processStarted, alive: () => alive };
}

function record(overrides: Partial<StoreHolderRecord> = {}): StoreHolderRecord {
  return { epoch: 1, host: "a", pid: 10, processStarted: 1, since: 0, renewedAt: 0, ...overrides };
}

describe("a harness's claim on its store", { timeout: 20_000 }, () => {
  const harnesses: Harness[] = [];
  afterEach(async () => {
    for (const harness of harnesses.splice(0)) await harness.close();
  });
  function harness(
    store: HarnessStore,
    clock: ManualClock,
    who: HolderIdentity,
    takeover = false,
    standby = false,
  ): Harness {
    const made = new Harness({
      store,
      clock,
      holderIdentity: who,
      takeover,
      standby,
      storeRenewMs: RENEW,
      heartbeatIntervalMs: 60_000,
    });
    harnesses.push(made);
    return made;
  }

  it("keeps the format of its records, and refuses a store of a format it does not read, standing by or not", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const first = harness(store, new ManualClock(), identity("a", 10));
    await first.ready;
    assert.equal(store.get("w/format"), STORE_FORMAT);
    await first.close();
    // A newer SDK's records (a format this one does not know): refused, never read.
    store.write([{ put: "w/format", value: STORE_FORMAT + 1 }]);
    for (const standby of [false, true]) {
      const refused = await Promise.resolve()
        .then(() => harness(store, new ManualClock(), identity("b", 20), false, standby).ready)
        .then(() => undefined, (error: unknown) => error);
      assert.ok(refused instanceof StoreFormatError, `standby ${standby}: ${refused}`);
      assert.equal(refused.format, STORE_FORMAT + 1);
      assert.match(refused.message, /records are of format 2, and this version reads format 1/);
    }
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "a", "no claim was written");

    // A store with one writer (a Durable Object's) is not claimed, and its format is kept too.
    const single = Object.assign(new MemoryHarnessStore({ values: "json" }), {
      singleWriter: true,
    });
    const alone = new Harness({ store: single, clock: new ManualClock() });
    harnesses.push(alone);
    await alone.ready;
    assert.equal(single.get("w/format"), STORE_FORMAT);
    assert.equal(single.get("w/holder"), undefined, "not claimed");
    await alone.close();
    single.write([{ put: "w/format", value: STORE_FORMAT + 1 }]);
    const refused = await Promise.resolve()
      .then(() => new Harness({ store: single, clock: new ManualClock() }).ready)
      .then(() => undefined, (error: unknown) => error);
    assert.ok(refused instanceof StoreFormatError, String(refused));
  });

  it("judges a holder live by one rule", () => {
    const stale = 3 * RENEW;
    // Another machine: live while it renews.
    assert.equal(holderIsLive(record(), identity("b", 10), stale, stale), true);
    assert.equal(holderIsLive(record(), identity("b", 10), stale + 1, stale), false);
    // Let go of: free.
    assert.equal(holderIsLive(record({ releasedAt: 0 }), identity("b", 10), 0, stale), false);
    // This machine: live while its process runs.
    assert.equal(holderIsLive(record(), identity("a", 11, 1, true), 0, stale), true);
    assert.equal(holderIsLive(record(), identity("a", 11, 1, false), 0, stale), false);
    // The same pid: this very process (another harness here) or an earlier one that had it.
    assert.equal(holderIsLive(record(), identity("a", 10, 1), 0, stale), true);
    assert.equal(holderIsLive(record(), identity("a", 10, 2), 0, stale), false);
    // Nothing known of this process (the portable core): its renewals decide.
    assert.equal(holderIsLive(record(), identity("", 0), 0, stale), true);
  });

  it("a fenced harness finds out when it renews, and closes its connections", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const clock = new ManualClock();
    const first = harness(store, clock, identity("a", 10));
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
    await first.accept(harnessEnd);
    const peer = new ExecutorPeer(executorEnd);
    await peer.start(registerParams());
    assert.throws(() => harness(store, new ManualClock(), identity("b", 20)), StoreHeldError);
    const second = harness(store, new ManualClock(), identity("b", 20), true);
    assert.equal(second.fenced, undefined);
    assert.equal(first.fenced, undefined, "not yet: it has written nothing since");
    await clock.advance(RENEW);
    const fenced = first.fenced as StoreFencedError | undefined;
    assert.ok(fenced instanceof StoreFencedError);
    assert.equal(fenced.holder?.host, "b");
    assert.equal(fenced.holder?.epoch, 2);
    const closed = await executorEnd.closed;
    assert.equal(closed.code, 1001);
    assert.match(closed.reason ?? "", /another harness took the store over/);
    // Its timers stopped with it: nothing more is written in its name.
    const holder = store.get<StoreHolderRecord>("w/holder")!;
    await clock.advance(10 * RENEW);
    assert.deepEqual(store.get("w/holder"), holder);
  });

  it("counts a holder that stopped renewing as gone, and a released store as free", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const start = Date.UTC(2026, 0, 1);
    const first = harness(store, new ManualClock(start), identity("a", 10));
    // Another machine, within three renewals of the holder's last: held.
    assert.throws(
      () => harness(store, new ManualClock(start + 3 * RENEW), identity("b", 20)),
      (error: unknown) =>
        error instanceof StoreHeldError && error.holder.host === "a" &&
        /host a, pid 10, since 2026-01-01T00:00:00.000Z, renewed 3 s ago/.test(error.message),
    );
    // Past them: the holder is gone (its machine died), and the store is taken.
    const second = harness(store, new ManualClock(start + 3 * RENEW + 1), identity("b", 20));
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "b");
    await second.close();
    // Let go of: the next claims it at once, whoever held it.
    harness(store, new ManualClock(start), identity("c", 30));
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "c");
    await first.close();
  });

  it("rejects ready on a store that answers with promises while another holds it", async () => {
    const inner = new MemoryHarnessStore({ values: "json" });
    const remote: HarnessStore = {
      get: (key) => Promise.resolve().then(() => inner.get(key)),
      list: (prefix, options) => Promise.resolve().then(() => inner.list(prefix, options)),
      write: (batch: readonly StoreOp[]) => Promise.resolve().then(() => inner.write(batch)),
    };
    const first = harness(remote, new ManualClock(), identity("a", 10));
    await first.ready;
    const second = harness(remote, new ManualClock(), identity("b", 20));
    await assert.rejects(second.ready, StoreHeldError);
    // It serves nobody: a connection is closed at once.
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
    await second.accept(harnessEnd);
    assert.equal((await executorEnd.closed).code, 1001);
  });

  it("a standby waits while the holder renews, and takes the store once it is gone, without fencing it", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const start = Date.UTC(2026, 0, 1);
    const holderClock = new ManualClock(start);
    const first = harness(store, holderClock, identity("a", 10));
    assert.equal(first.readiness, "serving");
    const standbyClock = new ManualClock(start);
    const second = harness(store, standbyClock, identity("b", 20), false, true);
    assert.equal(second.readiness, "standby");
    let ready = false;
    void second.ready.then(() => (ready = true));
    // A connect request is sent elsewhere while it stands by.
    const refused = await second.fetch(
      new Request("http://h/", { headers: { upgrade: "websocket" } }),
    );
    assert.equal(refused.status, 503);
    // The holder renews: the standby keeps waiting, however long.
    for (let i = 0; i < 10; i++) {
      await holderClock.advance(RENEW);
      await standbyClock.advance(RENEW);
    }
    assert.equal(second.readiness, "standby");
    assert.equal(ready, false);
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "a");
    // The holder stops renewing (its process froze or its machine died): three renewals later
    // the standby holds the store.
    await standbyClock.advance(4 * RENEW);
    assert.equal(second.readiness, "serving");
    assert.equal(ready, true);
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "b");
    // The old holder finds itself fenced at its next renewal, and says so.
    await holderClock.advance(5 * RENEW);
    assert.ok(first.fenced instanceof StoreFencedError);
    assert.equal(first.readiness, "fenced");
  });

  it("a standby takes a released store at its next try; closed while it waits, it stops waiting", async () => {
    const store = new MemoryHarnessStore({ values: "json" });
    const first = harness(store, new ManualClock(), identity("a", 10));
    const clock = new ManualClock();
    const second = harness(store, clock, identity("b", 20), false, true);
    const third = harness(store, new ManualClock(), identity("c", 30), false, true);
    assert.equal(second.readiness, "standby");
    await first.close();
    assert.equal(first.readiness, "closed");
    await clock.advance(RENEW);
    await second.ready;
    assert.equal(second.readiness, "serving");
    assert.equal(store.get<StoreHolderRecord>("w/holder")!.host, "b");
    await third.close();
    assert.equal(third.readiness, "closed");
  });
});
