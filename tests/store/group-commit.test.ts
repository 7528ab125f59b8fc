/**
 * Group commit in the SQLite store, on every driver of this runtime, on real files: the batches
 * written with `writeGrouped` in one turn are one transaction (a second connection sees none of
 * them before their promises resolve, and all of them after), a failed condition refuses its
 * batch alone, a failed commit loses the whole group and says so to every writer, no
 * transaction stays open across tasks (a burst's batches wait in memory), and a plain
 * `write` joins the waiting batches and commits them all. Then through a real harness over a
 * WebSocket: durable events whose transaction failed are refused with -32004 and, sent again,
 * accepted once each — and are in the file as the harness holds them.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  preparingDriver,
  type SqlDriver,
  SqlHarnessStore,
  StoreConditionError,
  UnavailableError,
} from "../../mod.ts";
import { Harness } from "../../harness/node.ts";
import { ExecutorPeer, registerParams } from "../helpers/executor-peer.ts";
import { DRIVERS, openSqliteStore, rawDatabase } from "./sqlite-fixture.ts";
import { storedEvents } from "../helpers/stored-events.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-group-commit-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** A driver over a real connection whose next `failCommits` commits throw (and roll back). */
async function failingDriver(
  driver: string,
  path: string,
): Promise<SqlDriver & { failCommits: number; commits: number }> {
  const inner = preparingDriver(await rawDatabase(driver, path));
  inner.exec("PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;");
  const wrapped = {
    ...inner,
    failCommits: 0,
    commits: 0,
    commit() {
      wrapped.commits++;
      if (wrapped.failCommits > 0) {
        wrapped.failCommits--;
        inner.rollback!();
        throw Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR" });
      }
      inner.commit!();
    },
  };
  return wrapped;
}

/** A timer's turn: every microtask before it has run. */
const nextTurn = () => new Promise((resolve) => setTimeout(resolve, 0));

for (const driver of DRIVERS) {
  describe(`SQLite group commit (${driver})`, { timeout: 30_000 }, () => {
    it("commits the batches of one turn in one transaction, durable when they resolve", async () => {
      const path = join(dir, `g${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      const other = await openSqliteStore(path, { driver });
      try {
        assert.equal(typeof store.writeGrouped, "function");
        const written: Promise<void>[] = [];
        for (let i = 0; i < 64; i++) {
          written.push(store.writeGrouped!([{ put: `k/${String(i).padStart(3, "0")}`, value: i }]));
        }
        // This store reads its own batches at once; another connection sees nothing yet.
        assert.equal(store.get("k/063"), 63);
        assert.deepEqual(other.list("k/"), []);
        await Promise.all(written);
        const rows = other.list<number>("k/");
        assert.equal(rows.length, 64);
        assert.deepEqual(rows.map(([, v]) => v), Array.from({ length: 64 }, (_, i) => i));
      } finally {
        store.close();
        other.close();
      }
    });

    it("refuses a batch whose condition fails, alone, and commits the others", async () => {
      const path = join(dir, `g${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      try {
        store.write([{ put: "epoch", value: 1 }]);
        const first = store.writeGrouped!([{ check: "epoch", value: 1 }, { put: "a", value: 1 }]);
        assert.throws(
          () => store.writeGrouped!([{ check: "epoch", value: 2 }, { put: "b", value: 2 }]),
          StoreConditionError,
        );
        // The check is read once per transaction; a write of the checked key is seen.
        const moved = store.writeGrouped!([{ check: "epoch", value: 1 }, {
          put: "epoch",
          value: 3,
        }]);
        assert.throws(
          () => store.writeGrouped!([{ check: "epoch", value: 1 }, { put: "c", value: 3 }]),
          StoreConditionError,
        );
        const last = store.writeGrouped!([{ check: "epoch", value: 3 }, { put: "d", value: 4 }]);
        await Promise.all([first, moved, last]);
        assert.deepEqual(store.list(""), [["a", 1], ["d", 4], ["epoch", 3]]);
      } finally {
        store.close();
      }
    });

    it("loses the whole group when its commit fails, and tells each writer", async () => {
      const path = join(dir, `g${++files}.db`);
      const raw = await failingDriver(driver, path);
      const store = new SqlHarnessStore(raw);
      try {
        store.write([{ put: "kept", value: 0 }]);
        raw.failCommits = 1;
        const lost = [1, 2, 3].map((i) => store.writeGrouped!([{ put: `lost/${i}`, value: i }]));
        const outcomes = await Promise.allSettled(lost);
        assert.deepEqual(outcomes.map((o) => o.status), ["rejected", "rejected", "rejected"]);
        assert.match(String((outcomes[0] as PromiseRejectedResult).reason), /disk I\/O error/);
        // Until the writers have heard, nothing more is decided on what was lost.
        assert.throws(() => store.writeGrouped!([{ put: "early", value: 1 }]), /disk I\/O error/);
        await nextTurn();
        await store.writeGrouped!([{ put: "after", value: 4 }]);
        assert.deepEqual(store.list(""), [["after", 4], ["kept", 0]]);
      } finally {
        store.close();
      }
    });

    it("holds no transaction across tasks: a burst's batches wait in memory", async () => {
      const path = join(dir, `g${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      // No wait for a lock: an open transaction of the first store would refuse its writes.
      const other = await openSqliteStore(path, { driver, busyTimeoutMs: 0 });
      try {
        // A group committed in this turn: the batches after it are a burst.
        await store.writeGrouped!([{ put: "first", value: 1 }]);
        const read = store.writeGrouped!([{ put: "read", value: 2 }]);
        // No transaction is open (a harness paused here would hold no lock).
        other.write([{ put: "other", value: 3 }]);
        // This store reads its batch at once (committed first).
        assert.equal(store.get("read"), 2);
        await read;
        const late = store.writeGrouped!([{ put: "late", value: 4 }]);
        other.write([{ put: "other", value: 5 }]);
        assert.deepEqual(other.list(""), [["first", 1], ["other", 5], ["read", 2]]);
        // Committed at the turn's end.
        await late;
        assert.deepEqual(other.get("late"), 4);
      } finally {
        store.close();
        other.close();
      }
    });

    it("refuses a burst's batch whose condition fails, and those after it", async () => {
      const path = join(dir, `g${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      try {
        store.write([{ put: "epoch", value: 1 }]);
        await store.writeGrouped!([{ put: "first", value: 1 }]);
        const kept = store.writeGrouped!([{ check: "epoch", value: 1 }, { put: "a", value: 1 }]);
        const refused = store.writeGrouped!([{ check: "epoch", value: 2 }, { put: "b", value: 2 }]);
        const after = store.writeGrouped!([{ put: "c", value: 3 }]);
        const outcomes = await Promise.allSettled([kept, refused, after]);
        assert.deepEqual(outcomes.map((o) => o.status), ["fulfilled", "rejected", "rejected"]);
        assert.ok((outcomes[1] as PromiseRejectedResult).reason instanceof StoreConditionError);
        assert.deepEqual(store.list(""), [["a", 1], ["epoch", 1], ["first", 1]]);
      } finally {
        store.close();
      }
    });

    it("commits the waiting batches with a plain write, before it returns", async () => {
      const path = join(dir, `g${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      const other = await openSqliteStore(path, { driver });
      try {
        const waiting = store.writeGrouped!([{ put: "w1", value: 1 }]);
        store.write([{ put: "w2", value: 2 }]);
        assert.deepEqual(other.list(""), [["w1", 1], ["w2", 2]]);
        await waiting;
      } finally {
        store.close();
        other.close();
      }
    });

    it("can be turned off", async () => {
      const store = await openSqliteStore(join(dir, `g${++files}.db`), {
        driver,
        groupCommit: false,
      });
      assert.equal(store.writeGrouped, undefined);
      store.close();
    });
  });
}

describe("Harness: durable events over a group commit that fails", { timeout: 30_000 }, () => {
  it("refuses the lost events with -32004, accepts them once each when sent again", async () => {
    const path = join(dir, `g${++files}.db`);
    const raw = await failingDriver(DRIVERS[0], path);
    const harness = new Harness({ insecureNoAuth: true, store: new SqlHarnessStore(raw) });
    const server = await harness.serve({ hostname: "127.0.0.1", port: 0 });
    const peer = await ExecutorPeer.dial(server.url);
    try {
      const { executor_id } = await peer.start(registerParams({ machine_id: "m_group" }));
      const executor = await harness.waitExecutor({ filter: (e) => e.id === executor_id });
      const session = await executor.assignSession({ session_id: "ses_group" });
      const send = (i: number) =>
        peer.peer.call("session.event", {
          session_id: "ses_group",
          event: { type: "tick", n: i },
        }, { id: `evt_group_${i}` });
      for (let i = 0; i < 8; i++) await send(i);
      raw.failCommits = 1;
      const first = await Promise.allSettled(Array.from({ length: 32 }, (_, i) => send(8 + i)));
      const refused = first.filter((o) => o.status === "rejected");
      assert.ok(refused.length > 0, "the failed transaction refused its events");
      for (const outcome of refused) {
        assert.ok((outcome as PromiseRejectedResult).reason instanceof UnavailableError);
      }
      // The executor sends every unacknowledged event again, with its id, in order.
      await nextTurn();
      for (let i = 0; i < 32; i++) {
        if (first[i].status === "rejected") await send(8 + i);
      }
      // Each once (those sent again come after the ones accepted meanwhile), numbered 1 to 40.
      const numbers = session.eventRecords.map((r) => (r.event as unknown as { n: number }).n);
      assert.deepEqual([...numbers].sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i));
      assert.deepEqual(session.eventRecords.map((r) => r.index), numbers.map((_, i) => i + 1));
      // And the file holds each of them once.
      const check = await openSqliteStore(path, { driver: DRIVERS[0] });
      const stored = storedEvents<{ record: { event: { n: number } } }>(
        check.list("ev/ses_group/"),
      );
      check.close();
      assert.deepEqual(stored.map((e) => e.record.event.n), numbers);
    } finally {
      await peer.close().catch(() => {});
      await harness.close();
      await server.close();
    }
  });
});
