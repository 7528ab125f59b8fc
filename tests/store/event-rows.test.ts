/**
 * A session's events accepted in one task go to a real SQLite file together, several to a row:
 * a row holds consecutive events of one block of 100 indexes, a large event has a row of its
 * own, and a log opened again on the file (rows of one event, as older harnesses wrote them, and
 * packed rows alike) reads its bounds' newest events back and still knows what it acknowledged.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EventLog } from "../../harness/event-log.ts";
import type { SessionEventParams } from "../../protocol/generated/contract.ts";
import type { HarnessStore, StoreOp } from "../../harness/mod.ts";
import { storedEvents } from "../helpers/stored-events.ts";
import { DRIVERS, openSqliteStore } from "./sqlite-fixture.ts";

const dir = mkdtempSync(join(tmpdir(), "bma-event-rows-"));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

const event = (n: number): SessionEventParams => ({
  session_id: "s",
  event: { type: "tick", n } as unknown as SessionEventParams["event"],
});
const range = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** Appends events `from`..`to` in one task (their frames `size` characters, `large` bigger). */
function appendAll(
  log: EventLog,
  from: number,
  to: number,
  size = 10,
  large = new Set<number>(),
): Promise<unknown> {
  const acks = [];
  for (let n = from; n <= to; n++) {
    acks.push(log.append(event(n), `r${n}`, large.has(n) ? 5_000 : size));
  }
  return Promise.all(acks);
}

for (const driver of DRIVERS) {
  describe(`durable events written several to a row (SQLite, ${driver})`, () => {
    it("writes the events of one task as one row, keyed by its first event", async () => {
      const store = await openSqliteStore(join(dir, `r${++files}.db`), { driver });
      try {
        const log = new EventLog("s", { store });
        await appendAll(log, 1, 10);
        const rows = store.list("ev/s/");
        assert.equal(rows.length, 1, "one row");
        assert.ok(Array.isArray(rows[0][1]), "an array of events");
        assert.deepEqual(storedEvents(rows).map((e) => e.record.index), range(1, 10));
        // One event alone in its task: a row of its own, as one event.
        await log.append(event(11), "r11", 10);
        const after = store.list("ev/s/");
        assert.equal(after.length, 2);
        assert.equal(Array.isArray(after[1][1]), false);
        assert.deepEqual(storedEvents(after).map((e) => e.record.index), range(1, 11));
      } finally {
        store.close();
      }
    });

    it("keeps a row within a block of 100 indexes, and a large event in a row of its own", async () => {
      const store = await openSqliteStore(join(dir, `r${++files}.db`), { driver });
      try {
        // A large event: over a 1,024th of the byte bound (1,000 characters here).
        const log = new EventLog("s", { store, maxBytes: 1_024_000 });
        await appendAll(log, 1, 120, 10, new Set([50]));
        const rows = store.list<unknown>("ev/s/");
        const firsts = rows.map(([key]) => Number(key.slice("ev/s/".length)));
        assert.deepEqual(firsts, [1, 50, 51, 100]);
        const sizes = rows.map(([, row]) => Array.isArray(row) ? row.length : 1);
        assert.deepEqual(sizes, [49, 1, 49, 21]);
        assert.deepEqual(storedEvents(rows).map((e) => e.record.index), range(1, 120));
      } finally {
        store.close();
      }
    });

    it("reads rows of one event and packed rows back, within its bounds, and knows what it acknowledged", async () => {
      const path = join(dir, `r${++files}.db`);
      // Rows of one event each (no group commit: as older harnesses wrote every event).
      const single = await openSqliteStore(path, { driver, groupCommit: false });
      try {
        const log = new EventLog("s", { store: single });
        for (let n = 1; n <= 30; n++) await log.append(event(n), `r${n}`, 10);
      } finally {
        single.close();
      }
      const store = await openSqliteStore(path, { driver });
      try {
        const again = EventLog.reopened("s", { store });
        assert.deepEqual(again.records.map((r) => r.index), range(1, 30));
        await appendAll(again, 31, 130);
        const rows = store.list("ev/s/");
        assert.equal(rows.length, 30 + 2, "30 rows of one event, then 70 and 30 packed");
        assert.deepEqual(storedEvents(rows).map((e) => e.record.index), range(1, 130));

        // Narrower bounds: the newest 5, cut inside a packed row.
        const narrow = EventLog.reopened("s", { store, maxRecords: 5 });
        assert.deepEqual(narrow.records.map((r) => r.index), range(126, 130));
        assert.equal(narrow.accepted, 130);
        // A resend of a kept event (its JSON-RPC id) is a duplicate; a new one comes next.
        assert.deepEqual(await narrow.append(event(130), "r130", 10), { duplicate: true });
        await narrow.append(event(131), "r131", 10);
        assert.deepEqual(narrow.records.map((r) => r.index), range(127, 131));
        // Its trimming let go of the block wholly below its oldest event (1 to 99, rows of both
        // kinds): wider bounds read back what the file still holds.
        const wide = EventLog.reopened("s", { store, maxRecords: 120 });
        assert.deepEqual(wide.records.map((r) => r.index), range(100, 131));
      } finally {
        store.close();
      }
    });

    it("refuses the events accepted after a lost write with it, before they are handed over", async () => {
      const real = await openSqliteStore(join(dir, `r${++files}.db`), { driver });
      // The first group commit is lost (as a failed transaction is), the others go through.
      let lose!: (error: Error) => void;
      let first = true;
      const store: HarnessStore = {
        singleWriter: real.singleWriter,
        get: (key) => real.get(key),
        list: (prefix, options) => real.list(prefix, options),
        write: (batch) => real.write(batch),
        writeGrouped: (batch: readonly StoreOp[]) => {
          if (!first) return real.writeGrouped!(batch);
          first = false;
          return new Promise<void>((_, reject) => lose = reject);
        },
        close: () => real.close(),
      };
      try {
        const log = new EventLog("s", { store });
        const lost = appendAll(log, 1, 5);
        // Their row is handed over once this task's microtasks ran.
        await Promise.resolve();
        await Promise.resolve();
        // More in the same turn: decided on the five, waiting for the turn's end.
        const after = appendAll(log, 6, 8);
        lose(new Error("the transaction was lost"));
        await assert.rejects(lost, /event store unavailable/);
        await assert.rejects(after, /event store unavailable/);
        await new Promise((resolve) => setTimeout(resolve, 10));
        assert.deepEqual(real.list("ev/s/"), [], "none of them written");
        // The log reads back what the store holds: the executor's resends start at index 1.
        await log.append(event(1), "r1", 10);
        assert.deepEqual(log.records.map((r) => r.index), [1]);
      } finally {
        real.close();
      }
    });

    it("hands unwritten events over before the session's events are forgotten", async () => {
      const store = await openSqliteStore(join(dir, `r${++files}.db`), { driver });
      try {
        const log = new EventLog("s", { store });
        const acks = appendAll(log, 1, 10);
        // In the same task as the appends: the forget's prefix delete must follow their rows.
        store.write(log.forget());
        await acks;
        assert.deepEqual(store.list("ev/s/"), []);
      } finally {
        store.close();
      }
    });
  });
}
