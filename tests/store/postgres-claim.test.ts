/**
 * The claim on a PostgreSQL table, in one process on injected clocks and identities (the
 * process-level story is postgres-one-writer.test.ts): a harness renews its claim, a fenced one
 * finds out by its renewal, writes nothing more and closes its connections (1001), a holder that
 * stopped renewing counts as gone, and a released table is claimed at once.
 */
import { after, afterEach, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  createLinkedTransportPair,
  Harness,
  type HarnessStore,
  type HolderIdentity,
  ManualClock,
  StoreFencedError,
  StoreHeldError,
  type StoreHolderRecord,
} from "../../node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { until } from "./harness-process.ts";
import { freshTable, openPostgresStore, RUNTIME } from "./postgres-fixture.ts";

const RENEW = 1_000;
const PROTOCOL = "bma.executor.v1.1";

let server: PostgresServer;
before(async () => {
  server = await PostgresServer.start();
});
after(async () => {
  await server?.stop();
});

function identity(host: string, pid: number): HolderIdentity {
  return { host, pid, processStarted: 1, alive: () => true };
}

describe(`a harness's claim on a PostgreSQL table, on ${RUNTIME}`, { timeout: 60_000 }, () => {
  const harnesses: Harness[] = [];
  const stores: HarnessStore[] = [];
  afterEach(async () => {
    for (const harness of harnesses.splice(0)) await harness.close();
    for (const store of stores.splice(0)) await store.close?.();
  });
  async function store(table: string): Promise<HarnessStore> {
    const opened = await openPostgresStore(server.url, { table });
    stores.push(opened);
    return opened;
  }
  function harness(
    on: HarnessStore,
    clock: ManualClock,
    who: HolderIdentity,
    takeover = false,
  ): Harness {
    const made = new Harness({
      store: on,
      clock,
      holderIdentity: who,
      takeover,
      storeRenewMs: RENEW,
      heartbeatIntervalMs: 60_000,
    });
    harnesses.push(made);
    return made;
  }

  it("renews; a fenced harness finds out when it renews, and closes its connections", async () => {
    const table = freshTable("claim");
    const clock = new ManualClock();
    const first = harness(await store(table), clock, identity("a", 10));
    await first.ready;
    const reader = await store(table);
    const claimed = (await reader.get<StoreHolderRecord>("w/holder"))!;
    await clock.advance(RENEW);
    await until(async () => {
      const now = await reader.get<StoreHolderRecord>("w/holder");
      return now!.renewedAt > claimed.renewedAt;
    }, "the renewal");
    const [executorEnd, harnessEnd] = createLinkedTransportPair({ protocol: PROTOCOL });
    await first.accept(harnessEnd);
    const peer = new ExecutorPeer(executorEnd);
    await peer.start(registerParams());

    const refused = harness(await store(table), new ManualClock(), identity("b", 20));
    await assert.rejects(
      refused.ready,
      (error: unknown) => error instanceof StoreHeldError && error.holder.host === "a",
    );
    const second = harness(await store(table), new ManualClock(), identity("b", 20), true);
    await second.ready;
    assert.equal(first.fenced, undefined, "not yet: it has written nothing since");
    const holder = await reader.get<StoreHolderRecord>("w/holder");
    await clock.advance(RENEW);
    await until(() => first.fenced !== undefined, "the fenced renewal");
    const fenced = first.fenced as StoreFencedError | undefined;
    assert.ok(fenced instanceof StoreFencedError);
    assert.equal(fenced.holder?.host, "b");
    assert.equal(fenced.holder?.epoch, 2);
    const closed = await executorEnd.closed;
    assert.equal(closed.code, 1001);
    // Its renewal wrote nothing, and nothing more is written in its name.
    assert.deepEqual(await reader.get("w/holder"), holder);
    await clock.advance(10 * RENEW);
    assert.deepEqual(await reader.get("w/holder"), holder);
    assert.equal(await reader.get("w/epoch"), 2);
  });

  it("counts a holder that stopped renewing as gone, and a released table as free", async () => {
    const table = freshTable("stale");
    const start = Date.UTC(2026, 0, 1);
    const first = harness(await store(table), new ManualClock(start), identity("a", 10));
    await first.ready;
    const held = harness(await store(table), new ManualClock(start + 3 * RENEW), identity("b", 20));
    await assert.rejects(
      held.ready,
      (error: unknown) =>
        error instanceof StoreHeldError &&
        /host a, pid 10, since 2026-01-01T00:00:00.000Z, renewed 3 s ago/.test(error.message),
    );
    const second = harness(
      await store(table),
      new ManualClock(start + 3 * RENEW + 1),
      identity("b", 20),
    );
    await second.ready;
    const reader = await store(table);
    assert.equal((await reader.get<StoreHolderRecord>("w/holder"))!.host, "b");
    await second.close();
    const third = harness(await store(table), new ManualClock(start), identity("c", 30));
    await third.ready;
    assert.equal((await reader.get<StoreHolderRecord>("w/holder"))!.host, "c");
  });
});
