/**
 * The PostgreSQL store on a real server (tests/helpers/postgres-server.ts: its own cluster in a
 * temp dir, 127.0.0.1 and a Unix socket): the conformance suite, its table and its collation,
 * group commit (one transaction per group, a failed condition refusing its batch and those after
 * it), two tables in one database, and the errors of a bad table or a database that is not there.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { StoreConditionError } from "../../mod.ts";
import { PostgresServer } from "../helpers/postgres-server.ts";
import { runConformance } from "./run-conformance.ts";
import {
  failingClient,
  freshTable,
  openPostgresStore,
  rawClient,
  RUNTIME,
} from "./postgres-fixture.ts";
import type { PostgresClientLike } from "../../node.ts";

let server: PostgresServer;
let raw: PostgresClientLike & { end(): Promise<void> };
before(async () => {
  server = await PostgresServer.start();
  raw = await rawClient(server.url);
});
after(async () => {
  await raw?.end();
  await server?.stop();
});

runConformance(`postgres on ${RUNTIME}`, () => {
  const table = freshTable("conformance");
  return Promise.resolve({
    subject: {
      open: () => openPostgresStore(server.url, { table }),
      openFailing: (nth: number) => openPostgresStore(failingClient(raw, nth), { table }),
      persistent: true,
      serializes: true,
      synchronous: false,
      largeValueBytes: 4 * 1024 * 1024,
    },
    dispose: () => {},
  });
});

describe(`postgres store on ${RUNTIME}`, { timeout: 60_000 }, () => {
  it('creates its table with keys in COLLATE "C", over TCP and the Unix socket', async () => {
    const table = freshTable("created");
    const store = await openPostgresStore(server.socketUrl, { table });
    try {
      await store.write([{ put: "b", value: 2 }, { put: "a", value: { one: 1 } }]);
      const columns = await raw.unsafe(
        "SELECT a.attname AS name, c.collname AS collation, format_type(a.atttypid, NULL) AS type " +
          "FROM pg_attribute a LEFT JOIN pg_collation c ON c.oid = a.attcollation " +
          "WHERE a.attrelid = $1::regclass AND a.attnum > 0 ORDER BY a.attnum",
        [table],
      );
      assert.deepEqual(columns.map((c) => [c.name, c.collation, c.type]), [
        ["key", "C", "text"],
        ["value", "default", "text"],
      ]);
      const rows = await raw.unsafe(`SELECT key, value FROM ${table} ORDER BY key`);
      assert.deepEqual(rows.map((r) => [r.key, r.value]), [["a", '{"one":1}'], ["b", "2"]]);
      // Opened again (another harness, the same table): what was written is there.
      const again = await openPostgresStore(server.url, { table });
      assert.deepEqual(await again.list(""), [["a", { one: 1 }], ["b", 2]]);
      await again.close();
    } finally {
      await store.close();
    }
  });

  it('refuses a table whose keys do not sort as "C", a bad name, no database, no role', async () => {
    const table = freshTable("collated");
    await raw.unsafe(`CREATE TABLE ${table} (key text PRIMARY KEY, value text NOT NULL)`);
    await assert.rejects(
      () => openPostgresStore(server.url, { table }),
      (error: Error) => error.name === "PostgresStoreUnavailableError" && /"C"/.test(error.message),
    );
    await assert.rejects(
      () => openPostgresStore(server.url, { table: "x; DROP TABLE y" }),
      /table/,
    );
    await assert.rejects(
      () =>
        openPostgresStore(`postgres://bma@127.0.0.1:${server.port}/no_such_database`, {
          retryMs: 0,
        }),
      (error: Error) =>
        error.name === "PostgresStoreUnavailableError" && /no_such_database/.test(error.message),
    );
    await assert.rejects(
      () => openPostgresStore(`postgres://no_such_role@127.0.0.1:${server.port}/postgres`),
      (error: Error) =>
        error.name === "PostgresStoreUnavailableError" && /no_such_role/.test(error.message),
    );
  });

  it("serves a table made beforehand to a role that may not create tables (docs/store.md)", async () => {
    const table = freshTable("least");
    const role = `least_${table.slice(-8)}`;
    await raw.unsafe(`CREATE ROLE ${role} LOGIN`);
    await raw.unsafe(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
    await raw.unsafe(
      `CREATE TABLE ${table} (key text COLLATE "C" PRIMARY KEY, value text NOT NULL)`,
    );
    await raw.unsafe(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${table} TO ${role}`);
    const store = await openPostgresStore(
      `postgres://${role}@127.0.0.1:${server.port}/postgres`,
      { table, retryMs: 0 },
    );
    try {
      await store.write([{ put: "k", value: { ok: true } }]);
      assert.deepEqual(await store.get("k"), { ok: true });
    } finally {
      await store.close();
    }
  });

  it("names the package to install when the postgres client is missing", async () => {
    await assert.rejects(
      () =>
        openPostgresStore(server.url, {
          load: () => Promise.reject(new Error("Cannot find package 'postgres'")),
        }),
      (error: Error) =>
        error.name === "PostgresStoreUnavailableError" &&
        /npm install postgres/.test(error.message) &&
        /Cannot find package/.test(String((error.cause as Error)?.message)),
    );
  });

  it("keeps two tables of one database apart", async () => {
    const a = await openPostgresStore(server.url, { table: freshTable("part_a") });
    const b = await openPostgresStore(server.url, { table: freshTable("part_b") });
    try {
      await a.write([{ put: "k", value: "a" }, { put: "w/epoch", value: 1 }]);
      await b.write([{ put: "k", value: "b" }]);
      assert.equal(await a.get("k"), "a");
      assert.equal(await b.get("k"), "b");
      assert.equal(await b.get("w/epoch"), undefined);
      await b.write([{ deletePrefix: "k" }]);
      assert.equal(await a.get("k"), "a");
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("commits the grouped batches of a turn in one transaction, durable when they resolve", async () => {
    const table = freshTable("group");
    const store = await openPostgresStore(server.url, { table });
    try {
      assert.equal(typeof store.writeGrouped, "function");
      await store.write([{ put: "epoch", value: 1 }]);
      const before = Number((await raw.unsafe("SELECT txid_current() AS x"))[0].x);
      const written: Promise<void>[] = [];
      for (let i = 0; i < 64; i++) {
        written.push(
          store.writeGrouped!([{ check: "epoch", value: 1 }, {
            put: `k/${String(i).padStart(3, "0")}`,
            value: i,
          }]),
        );
      }
      await Promise.all(written);
      const after = Number((await raw.unsafe("SELECT txid_current() AS x"))[0].x);
      // One transaction for the 64 batches (and one for each txid_current above).
      assert.equal(after - before, 2);
      const rows = await store.list<number>("k/");
      assert.deepEqual(rows.map(([, v]) => v), Array.from({ length: 64 }, (_, i) => i));
    } finally {
      await store.close();
    }
  });

  it("refuses a batch whose condition fails and the grouped batches after it", async () => {
    const store = await openPostgresStore(server.url, { table: freshTable("refuse") });
    try {
      await store.write([{ put: "epoch", value: 1 }]);
      const first = store.writeGrouped!([{ check: "epoch", value: 1 }, { put: "a", value: 1 }]);
      const moved = store.writeGrouped!([{ check: "epoch", value: 1 }, { put: "epoch", value: 2 }]);
      const stale = store.writeGrouped!([{ check: "epoch", value: 1 }, { put: "c", value: 3 }]);
      const later = store.writeGrouped!([{ check: "epoch", value: 2 }, { put: "d", value: 4 }]);
      const outcomes = await Promise.allSettled([first, moved, stale, later]);
      assert.deepEqual(outcomes.map((o) => o.status), [
        "fulfilled",
        "fulfilled",
        "rejected",
        "rejected",
      ]);
      const refusal = (outcomes[2] as PromiseRejectedResult).reason;
      assert.ok(refusal instanceof StoreConditionError && refusal.key === "epoch");
      // Until the writers have heard, nothing more is decided on what was refused.
      assert.throws(() => store.writeGrouped!([{ put: "early", value: 1 }]), StoreConditionError);
      await new Promise((resolve) => setTimeout(resolve, 0));
      await store.writeGrouped!([{ put: "after", value: 5 }]);
      assert.deepEqual(await store.list(""), [["a", 1], ["after", 5], ["epoch", 2]]);
    } finally {
      await store.close();
    }
  });

  it("lets only one of two first claims of an empty table hold", async () => {
    const table = freshTable("race");
    const stores = await Promise.all(
      Array.from({ length: 4 }, () => openPostgresStore(server.url, { table })),
    );
    try {
      const claims = await Promise.allSettled(stores.map((store, i) =>
        store.write([
          { check: "w/epoch" },
          { put: "w/epoch", value: 1 },
          { put: "w/holder", value: i },
        ])
      ));
      assert.equal(claims.filter((c) => c.status === "fulfilled").length, 1);
      for (const claim of claims) {
        if (claim.status === "rejected") {
          assert.ok(claim.reason instanceof StoreConditionError, String(claim.reason));
        }
      }
      const winner = claims.findIndex((c) => c.status === "fulfilled");
      assert.equal(await stores[0].get("w/holder"), winner);
    } finally {
      for (const store of stores) await store.close();
    }
  });
});
