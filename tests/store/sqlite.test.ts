/**
 * The SQLite file store, with each driver this runtime ships (Node: libsql; Deno: node:sqlite
 * and libsql; Bun: bun:sqlite and libsql): the conformance suite on real files in a temp dir,
 * write-ahead logging, a file locked past the busy timeout, and the errors of a driver that is
 * missing.
 */
import { after, describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  chmodSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  openSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { Buffer } from "node:buffer";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  preparingDriver,
  SqlHarnessStore,
  SqliteDriverUnavailableError,
  StoreBusyError,
} from "../../mod.ts";
import { failAtStatement } from "./store-conformance.ts";
import { runConformance } from "./run-conformance.ts";
import { DRIVERS, openSqliteStore, rawDatabase, RUNTIME } from "./sqlite-fixture.ts";

const root = mkdtempSync(join(tmpdir(), "bma-store-"));
after(() => rmSync(root, { recursive: true, force: true }));
let files = 0;

for (const driver of DRIVERS) {
  runConformance(`sqlite on ${RUNTIME} (${driver})`, () => {
    const path = join(root, `conformance-${++files}.db`);
    return Promise.resolve({
      subject: {
        open: () => openSqliteStore(path, { driver }),
        async openFailing(nth: number) {
          const db = await rawDatabase(driver, path);
          return new SqlHarnessStore(failAtStatement(preparingDriver(db), nth));
        },
        persistent: true,
        serializes: true,
        synchronous: true,
        largeValueBytes: 4 * 1024 * 1024,
      },
      dispose: () => {},
    });
  });

  describe(`sqlite file on ${RUNTIME} (${driver})`, () => {
    it("writes ahead to a log beside the file, and keeps the data in the file", async () => {
      const path = join(root, `wal-${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      store.write([{ put: "a", value: 1 }, { put: "b", value: 2 }]);
      assert.ok(existsSync(`${path}-wal`), "no -wal file: not in WAL mode");
      store.close();
      const raw = await rawDatabase(driver, path);
      const rows = raw.prepare("SELECT key, value FROM bma_harness_store ORDER BY key").all();
      assert.deepEqual(rows.map((r: any) => [r.key, r.value]), [["a", "1"], ["b", "2"]]);
      const mode = raw.prepare("PRAGMA journal_mode").all() as any[];
      assert.equal(mode[0].journal_mode, "wal");
      raw.close();
    });

    it("creates its file, -wal and -shm readable by the owner only; a file of its own keeps its mode", async () => {
      // Under the usual umask 022 they were 0644: every local user read the calls' inputs.
      const path = join(root, `private-${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      try {
        store.write([{ put: "a", value: { env: { TOKEN: "secret" } } }]);
        for (const file of [path, `${path}-wal`, `${path}-shm`]) {
          assert.equal(statSync(file).mode & 0o777, 0o600, file);
        }
      } finally {
        store.close();
      }
      const shared = join(root, `shared-${++files}.db`);
      closeSync(openSync(shared, "w", 0o640));
      chmodSync(shared, 0o640);
      (await openSqliteStore(shared, { driver })).close();
      assert.equal(statSync(shared).mode & 0o777, 0o640, "the operator's mode is kept");
    });

    it("leaves the whole store in the file once closed: a copy of the file alone holds it", async () => {
      const path = join(root, `closed-${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      store.write([{ put: "a", value: 1 }, { put: "b", value: { deep: [2] } }]);
      store.close();
      // What a backup of the file alone (without its -wal) takes.
      const copy = join(root, `copy-${++files}.db`);
      copyFileSync(path, copy);
      const copied = await openSqliteStore(copy, { driver });
      try {
        assert.equal(copied.get("a"), 1);
        assert.deepEqual(copied.get("b"), { deep: [2] });
      } finally {
        copied.close();
      }
    });

    it("refuses a file whose pages are damaged (SqliteStoreDamagedError), never serving it", async () => {
      const path = join(root, `damaged-${++files}.db`);
      const store = await openSqliteStore(path, { driver });
      const value = "v".repeat(2_000);
      for (let i = 0; i < 200; i++) {
        store.write([{ put: `call/${String(i).padStart(4, "0")}`, value }]);
      }
      store.close();
      // Garbage over the pages after the schema's, as a bad disk or a stray write leaves them.
      const fd = openSync(path, "r+");
      writeSync(fd, Buffer.alloc(8_000, 0xa5), 0, 8_000, 4_096 * 3);
      closeSync(fd);
      await assert.rejects(
        openSqliteStore(path, { driver }),
        (error: Error) =>
          error.name === "SqliteStoreDamagedError" && /damaged .*backup/.test(error.message),
      );
    });

    it("opens with synchronous: full and a table of its own beside another", async () => {
      const path = join(root, `full-${++files}.db`);
      const a = await openSqliteStore(path, { driver, synchronous: "full" });
      const b = await openSqliteStore(path, { driver, table: "other_harness" });
      a.write([{ put: "k", value: "a" }]);
      b.write([{ put: "k", value: "b" }]);
      assert.equal(a.get("k"), "a");
      assert.equal(b.get("k"), "b");
      a.close();
      b.close();
    });

    it("is StoreBusyError, never the driver's error, when the file stays locked", async () => {
      const path = join(root, `locked-${++files}.db`);
      // Another connection holds the fresh file's exclusive lock (no WAL yet): the store can
      // neither switch it to WAL nor read it, however long it waits.
      const holder = await rawDatabase(driver, path);
      holder.exec("BEGIN EXCLUSIVE");
      try {
        await assert.rejects(
          () => openSqliteStore(path, { driver, busyTimeoutMs: 100 }),
          (e: unknown) => e instanceof StoreBusyError && e.cause !== undefined,
        );
      } finally {
        holder.exec("ROLLBACK");
        holder.close();
      }
      (await openSqliteStore(path, { driver, busyTimeoutMs: 100 })).close();
    });

    it("refuses a file that is not a database, and bad options", async () => {
      const path = join(root, `garbage-${++files}.db`);
      writeFileSync(
        path,
        "this is not a SQLite database, it is a text file of some length\n".repeat(100),
      );
      await assert.rejects(() => openSqliteStore(path, { driver }));
      const good = join(root, `options-${++files}.db`);
      await assert.rejects(
        () => openSqliteStore(good, { driver, synchronous: "off" as "full" }),
        /synchronous/,
      );
      await assert.rejects(
        () => openSqliteStore(good, { driver, table: "x; DROP TABLE y" }),
        /table/,
      );
    });
  });
}

describe(`sqlite drivers on ${RUNTIME}`, () => {
  it("refuses a driver it does not have, with a typed error", async () => {
    const path = join(root, `none-${++files}.db`);
    await assert.rejects(
      () => openSqliteStore(path, { driver: "postgres" }),
      (e: unknown) => e instanceof SqliteDriverUnavailableError && e.driver === "postgres",
    );
  });

  it("names the missing built-in when node:sqlite is not there", async () => {
    let builtIn = true;
    try {
      const specifier = "node:sqlite";
      await import(specifier);
    } catch {
      builtIn = false;
    }
    if (RUNTIME !== "node") return;
    const path = join(root, `node-sqlite-${++files}.db`);
    const opened = openSqliteStore(path, { driver: "node:sqlite" });
    if (builtIn) {
      (await opened).close();
      return;
    }
    await assert.rejects(
      opened,
      (e: unknown) => e instanceof SqliteDriverUnavailableError && e.driver === "node:sqlite",
    );
  });
});
