/**
 * The PostgreSQL store when its server goes away (`pg_ctl -m immediate stop`, every connection
 * cut) in the middle of a stream of writes: every write it acknowledged is in the table, what it
 * could not commit it refuses (after retrying for `retryMs`), a write waiting while the server
 * comes back within `retryMs` is committed, and once the server is back the store goes on. Then
 * through a real harness over a WebSocket: the durable events of the lost transactions are
 * refused (-32004), none acknowledged is lost, and sent again after the restart each is stored
 * once, in order, with the harness still holding its table; meanwhile its readiness says
 * `store_failing`, also for an idle harness (its claim's renewal finds the server gone, and
 * back). And a store that answers later: an ended session read back from it (after a restart)
 * answers a brain's page without `wait_ms` with its events, not an empty ended log.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { UnavailableError } from "../../mod.ts";
import { Hono } from "hono";
import { brainApi, Harness, healthRoutes } from "../../harness/node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { freshTable, openPostgresStore, rawClient, RUNTIME } from "./postgres-fixture.ts";
import { storedEvents } from "../helpers/stored-events.ts";

let server: PostgresServer;
before(async () => {
  server = await PostgresServer.start();
});
after(async () => {
  await server?.stop();
});

const pad = (n: number) => String(n).padStart(5, "0");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe(`postgres store on ${RUNTIME}: the server goes away`, { timeout: 120_000 }, () => {
  it("keeps what it acknowledged, refuses what it could not commit, and goes on", async () => {
    const table = freshTable("loss");
    const store = await openPostgresStore(server.url, { table, retryMs: 1_000 });
    const acked = new Set<number>();
    const refused = new Set<number>();
    const written: Promise<void>[] = [];
    const write = (n: number) =>
      written.push(
        store.writeGrouped!([{ put: `e/${pad(n)}`, value: n }, { put: "last", value: n }]).then(
          () => void acked.add(n),
          () => void refused.add(n),
        ),
      );
    try {
      let n = 0;
      let down = false;
      // A stream of grouped writes; the crash lands among them.
      const crashed = (async () => {
        while (acked.size < 50) await sleep(1);
        await server.crash();
        down = true;
      })();
      while (!down) {
        write(++n);
        await sleep(1);
      }
      await crashed;
      for (let i = 0; i < 10; i++) write(++n);
      await Promise.all(written);
      assert.ok(acked.size >= 50, `acknowledged ${acked.size}`);
      assert.ok(refused.size >= 10, `refused ${refused.size}: the writes while it was down`);
      assert.equal(acked.size + refused.size, n);

      // Back: the store goes on.
      server.restart();
      await store.write([{ put: "after", value: "restart" }]);
      assert.equal(await store.get("after"), "restart");

      // A write that waits while the server comes back (within retryMs) is committed.
      const check = await openPostgresStore(server.url, { table, retryMs: 60_000 });
      assert.equal(await check.get("after"), "restart");
      await server.crash();
      const waiting = check.write([{ put: "waited", value: true }]);
      setTimeout(() => server.restart(), 300);
      await waiting;
      const stored = new Set((await check.list<number>("e/")).map(([, value]) => value));
      for (const a of acked) assert.ok(stored.has(a), `acknowledged ${a} is not stored`);
      assert.equal(await check.get("waited"), true);
      await check.close();
    } finally {
      await store.close();
    }
  });

  it("a harness refuses the events it could not commit, and takes them again", async () => {
    if (!server.up) server.restart();
    const table = freshTable("harness");
    const store = await openPostgresStore(server.url, { table, retryMs: 500 });
    const harness = new Harness({ insecureNoAuth: true, store });
    await harness.ready;
    const listening = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const peer = await ExecutorPeer.dial(listening.url);
    try {
      const { executor_id } = await peer.start(registerParams({ machine_id: "m_loss" }));
      const executor = await harness.waitExecutor({ filter: (e) => e.id === executor_id });
      const session = await executor.assignSession({ session_id: "ses_loss" });
      const send = (i: number) =>
        peer.peer.call("session.event", {
          session_id: "ses_loss",
          event: { type: "tick", n: i },
        }, { id: `evt_loss_${i}` });
      // Each until it is accepted (as the SDK's executor does): the store's pool may take a few
      // retries to find a restarted server, and a refusal meanwhile is -32004 again.
      const sendUntilAccepted = async (i: number) => {
        for (let attempt = 1;; attempt++) {
          try {
            return await send(i);
          } catch (error) {
            if (!(error instanceof UnavailableError) || attempt === 100) throw error;
            await sleep(100);
          }
        }
      };
      for (let i = 0; i < 8; i++) await sendUntilAccepted(i);
      const first: Promise<unknown>[] = [];
      for (let i = 8; i < 48; i++) {
        first.push(send(i));
        if (i === 20) await server.crash();
      }
      const outcomes = await Promise.allSettled(first);
      const lost = outcomes.flatMap((o, i) => o.status === "rejected" ? [8 + i] : []);
      assert.ok(lost.length > 0, "the events after the crash were refused");
      assert.equal(harness.readiness, "store_failing", "/readyz: its store's writes fail");
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") {
          assert.ok(outcome.reason instanceof UnavailableError, String(outcome.reason));
        }
      }
      server.restart();
      // The executor sends every unacknowledged event again, with its id, in order.
      for (const i of lost) await sendUntilAccepted(i);
      assert.equal(harness.readiness, "serving");
      const numbers = session.eventRecords.map((r) => (r.event as unknown as { n: number }).n);
      assert.deepEqual([...numbers].sort((a, b) => a - b), Array.from({ length: 48 }, (_, i) => i));
      assert.deepEqual(session.eventRecords.map((r) => r.index), numbers.map((_, i) => i + 1));
      const reader = await openPostgresStore(server.url, { table });
      const stored = storedEvents<{ record: { event: { n: number } } }>(
        await reader.list("ev/ses_loss/"),
      );
      await reader.close();
      assert.deepEqual(stored.map((e) => e.record.event.n), numbers);
      assert.equal(harness.fenced, undefined, "still the holder");
    } finally {
      await peer.close().catch(() => {});
      await harness.close();
      await listening.close();
      await store.close();
    }
  });

  it("an ended session read back from the store answers a brain's page with its events at once", async () => {
    if (!server.up) server.restart();
    const table = freshTable("ended");
    const store = await openPostgresStore(server.url, { table });
    const harness = new Harness({ insecureNoAuth: true, store });
    await harness.ready;
    const listening = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const peer = await ExecutorPeer.dial(listening.url);
    try {
      const { executor_id } = await peer.start(registerParams({ machine_id: "m_ended" }));
      const executor = await harness.waitExecutor({ filter: (e) => e.id === executor_id });
      const session = await executor.assignSession({ session_id: "ses_ended" });
      for (let n = 0; n < 5; n++) {
        await peer.peer.call("session.event", {
          session_id: "ses_ended",
          event: { type: "tick", n },
        }, { id: `evt_ended_${n}` });
      }
      await session.stop();
    } finally {
      await peer.close().catch(() => {});
      await harness.close();
      await listening.close();
      await store.close();
    }
    // A harness started again on the table: the session is read back from the store.
    const reopened = await openPostgresStore(server.url, { table });
    const next = new Harness({ insecureNoAuth: true, store: reopened });
    try {
      await next.ready;
      const api = brainApi(next, { authorize: () => true, basePath: "/v1/harness" });
      // No wait_ms (the default 0): the events are there, not awaited.
      const answer = await api.fetch(
        new Request("http://brain.invalid/v1/harness/sessions/ses_ended/events"),
      );
      assert.equal(answer.status, 200);
      const page = await answer.json();
      assert.deepEqual(page.events.map((e: { event: { n: number } }) => e.event.n), [
        0,
        1,
        2,
        3,
        4,
      ]);
      assert.equal(page.ended, true);
      assert.equal(page.next, 5);
    } finally {
      await next.close();
      await reopened.close();
    }
  });

  it("an idle harness's /readyz says store_failing while the server is down, serving once back", async () => {
    if (!server.up) server.restart();
    const store = await openPostgresStore(server.url, { table: freshTable("idle"), retryMs: 200 });
    // Nothing but the claim's renewal writes: it finds the server gone, and back.
    const harness = new Harness({ insecureNoAuth: true, store, storeRenewMs: 100 });
    await harness.ready;
    const app = new Hono().route("/", healthRoutes(harness));
    const listening = await harness.serve({ hostname: "127.0.0.1", port: 0, fetch: app.fetch });
    const readyz = async () => {
      const answer = await fetch(`${listening.httpUrl}/readyz`);
      return `${answer.status} ${(await answer.json()).status}`;
    };
    const becomes = async (want: string) => {
      let seen = "";
      for (let i = 0; i < 300 && seen !== want; i++) {
        seen = await readyz();
        if (seen !== want) await sleep(50);
      }
      assert.equal(seen, want);
    };
    try {
      assert.equal(await readyz(), "200 serving");
      await server.crash();
      await becomes("503 store_failing");
      server.restart();
      await becomes("200 serving");
      assert.equal(harness.fenced, undefined, "still the holder");
    } finally {
      await harness.close();
      await listening.close();
      await store.close();
    }
  });

  it("a write blocked by a harness store's session stuck in its transaction ends that session and goes on", async () => {
    if (!server.up) server.restart();
    const table = freshTable("stuck");
    const store = await openPostgresStore(server.url, { table, idleInTransactionTimeoutMs: 300 });
    const raw = await rawClient(server.url);
    try {
      await store.write([{ put: "k", value: 1 }]);
      // A session that holds the row and never goes on, which the server's idle timeout does not
      // end (as a harness frozen in the middle of a pipeline): here it has no timeout at all.
      let locked!: () => void;
      const holding = new Promise<void>((resolve) => (locked = resolve));
      const stuck = (raw as unknown as {
        begin(body: (tx: { unsafe(q: string): Promise<unknown> }) => Promise<unknown>): Promise<
          unknown
        >;
      }).begin(async (tx) => {
        // Named as a store's transaction names its session (a frozen harness's would be).
        await tx.unsafe("SELECT set_config('application_name', 'bma-harness-store', true)");
        await tx.unsafe(`SELECT value FROM "${table}" WHERE key = 'k' FOR UPDATE`);
        locked();
        await new Promise(() => {});
      }).then(() => "committed", (error) => String(error));
      await holding;
      // Blocked on the row until the store ends the stuck session.
      await store.write([{ put: "k", value: 2 }]);
      assert.equal(await store.get("k"), 2);
      assert.match(await stuck, /terminat/i, "the stuck session was ended");
    } finally {
      await Promise.resolve(raw.end()).catch(() => {});
      await store.close();
    }
  });
  it("a write blocked by anyone else's transaction waits for it, and never ends it", async () => {
    if (!server.up) server.restart();
    const table = freshTable("foreign");
    const store = await openPostgresStore(server.url, { table, idleInTransactionTimeoutMs: 300 });
    const raw = await rawClient(server.url);
    const watcher = await rawClient(server.url);
    type Tx = { unsafe(q: string): Promise<unknown> };
    type Begin = { begin(body: (tx: Tx) => Promise<unknown>): Promise<unknown> };
    try {
      await store.write([{ put: "k", value: 1 }]);
      // An operator's (or a migration's) transaction holding the row.
      let locked!: () => void;
      const holding = new Promise<void>((resolve) => (locked = resolve));
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const foreign = (raw as unknown as Begin).begin(async (tx) => {
        await tx.unsafe(`SELECT value FROM "${table}" WHERE key = 'k' FOR UPDATE`);
        locked();
        await released;
      }).then(() => "committed", (error) => String(error));
      await holding;
      const writing = store.write([{ put: "k", value: 2 }]);
      // Let the store's transaction wait on the lock for ten times the idle timeout, as the
      // server sees it: a store that ends blockers would have ended this one by then.
      const waitedLong = async () => {
        const rows = await (watcher as unknown as { unsafe(q: string): Promise<unknown[]> })
          .unsafe(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'bma-harness-store' " +
              "AND wait_event_type = 'Lock' AND now() - state_change > interval '3 seconds'",
          );
        return rows.length > 0;
      };
      while (!(await waitedLong())) await sleep(50);
      release();
      assert.equal(await foreign, "committed", "the other transaction was left alone");
      await writing;
      assert.equal(await store.get("k"), 2);
    } finally {
      await Promise.resolve(raw.end()).catch(() => {});
      await Promise.resolve(watcher.end()).catch(() => {});
      await store.close();
    }
  });
});
