/**
 * {@linkcode SqlHarnessStore}: the {@linkcode HarnessStore} over one SQLite table, written once
 * for every SQLite this SDK runs on (`libsql`, `bun:sqlite`, `node:sqlite`, a Durable Object's
 * `ctx.storage.sql`) through a {@linkcode SqlDriver} of four synchronous calls. The table:
 *
 * ```sql
 * CREATE TABLE bma_harness_store (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID
 * ```
 *
 * Keys compare with SQLite's `BINARY` collation (their UTF-8 bytes: code point order), values
 * are JSON text. A batch of more than one operation runs in one transaction.
 *
 * @module
 */
import { LocalError } from "../../protocol/errors.ts";
import { afterTurn, TurnBurst } from "../after-turn.ts";
import {
  batchTexts,
  checkBatch,
  checkKey,
  checkList,
  type CheckOp,
  type HarnessStore,
  InvalidStoreRequestError,
  keyRange,
  type ListOptions,
  prefixEnd,
  RANGE_EXCLUSIVE_LOW,
  RANGE_HAS_HIGH,
  RANGE_REVERSE,
  StoreBusyError,
  StoreClosedError,
  StoreConditionError,
  type StoreOp,
} from "./store.ts";

/** A value bound to, or read from, a statement. */
export type SqlValue = string | number | null;

/** A row as a driver returns it, by column name. */
export type SqlRow = Record<string, unknown>;

/**
 * The few synchronous calls {@linkcode SqlHarnessStore} makes of a SQLite connection. A driver
 * caches its prepared statements by SQL text (the store sends a handful of fixed statements).
 */
export interface SqlDriver {
  /** Runs SQL without parameters and without rows (schema, pragmas); may hold several statements. */
  exec(sql: string): void;
  /** Runs one statement with positional `?` parameters, ignoring rows. */
  run(sql: string, params: readonly SqlValue[]): void;
  /** Runs one query with positional `?` parameters: its rows. */
  all(sql: string, params: readonly SqlValue[]): SqlRow[];
  /**
   * Runs one query with positional `?` parameters: its first row, `undefined` when there is
   * none. Optional: without it the store reads a key's row with {@linkcode SqlDriver.all}.
   */
  get?(sql: string, params: readonly SqlValue[]): SqlRow | undefined;
  /** Runs `body` in a transaction: committed when it returns, rolled back when it throws. */
  transaction(body: () => void): void;
  /**
   * Opens a transaction that {@linkcode SqlDriver.commit} or {@linkcode SqlDriver.rollback}
   * ends (with all three, the store commits batches in groups: `writeGrouped`).
   */
  begin?(): void;
  /** Commits the transaction {@linkcode SqlDriver.begin} opened. */
  commit?(): void;
  /** Rolls back the transaction {@linkcode SqlDriver.begin} opened (a no-op when it is gone). */
  rollback?(): void;
  /** Closes the connection. */
  close?(): void;
}

/** Options of a {@linkcode SqlHarnessStore}. */
export interface SqlHarnessStoreOptions {
  /** The table (created when missing). Default `bma_harness_store`. */
  readonly table?: string;
  /** Sets {@linkcode HarnessStore.singleWriter}: only one harness can reach this database. */
  readonly singleWriter?: boolean;
  /**
   * Commits the batches of `writeGrouped` written in one turn of the event loop in one
   * transaction (group commit), when the driver can hold a transaction open. Default true.
   */
  readonly groupCommit?: boolean;
}

/** The table a {@linkcode SqlHarnessStore} uses unless told otherwise. */
export const DEFAULT_STORE_TABLE = "bma_harness_store";

/** The named SQLite driver could not be loaded on this runtime. */
export class SqliteDriverUnavailableError extends LocalError {
  /** The driver that was asked for. */
  readonly driver: string;
  /** The driver asked for, why it cannot load, and the failure behind it as `cause`. */
  constructor(driver: string, hint: string, options?: { cause?: unknown }) {
    super(`SQLite driver ${driver} is not available: ${hint}`, options);
    this.name = "SqliteDriverUnavailableError";
    this.driver = driver;
  }
}

/**
 * The SQLite file fails SQLite's own check (`PRAGMA quick_check`) when it is opened: pages of it
 * are damaged (written over, cut short), so what the harness acknowledged may not read back. The
 * store is not served: restore the file from a backup, or move it aside to start empty.
 */
export class SqliteStoreDamagedError extends LocalError {
  /** What SQLite's check found (its first finding), and its error as `cause` when it threw. */
  constructor(finding: string, options?: { cause?: unknown }) {
    super(
      `the SQLite file is damaged (${finding}): restore it from a backup, or move it aside ` +
        "to start an empty store",
      options,
    );
    this.name = "SqliteStoreDamagedError";
  }
}

/**
 * Runs SQLite's own check of the file (`PRAGMA quick_check`, every page read once) and throws
 * {@linkcode SqliteStoreDamagedError} when it finds damage: a harness serves no store it could
 * not read back whole.
 */
export function checkSqliteFile(driver: SqlDriver): void {
  let rows: SqlRow[];
  try {
    rows = driver.all("PRAGMA quick_check(1)", []);
  } catch (error) {
    if (busyOr(error) instanceof StoreBusyError) throw busyOr(error);
    throw new SqliteStoreDamagedError(error instanceof Error ? error.message : String(error), {
      cause: error,
    });
  }
  const finding = String(Object.values(rows[0] ?? {})[0] ?? "no answer");
  if (finding === "ok") return;
  // One line: "*** in database main ***\nPage 4: ..." says where; the page is what matters.
  const said = finding.replace(/\*\*\* in database \w+ \*\*\*/, "").replace(/\s+/g, " ").trim();
  throw new SqliteStoreDamagedError(said.length > 200 ? `${said.slice(0, 200)}…` : said);
}

/** The batches of one transaction of group commit: they are durable, or lost, together. */
interface CommitGroup {
  readonly done: Promise<void>;
  resolve(): void;
  reject(error: unknown): void;
}

/** A batch of a burst, waiting in memory (no transaction open) for the end of the turn. */
interface PendingBatch {
  readonly batch: readonly StoreOp[];
  readonly texts: (string | undefined)[];
  readonly checks: number[] | undefined;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * A {@linkcode HarnessStore} over one SQLite table. Every method answers synchronously but
 * `writeGrouped`, whose batches are committed together: those of one task in a transaction
 * opened by the first and committed once the task's microtasks ran; those of a burst (tasks
 * one after the other, each with a batch) kept in memory until the turn's end, then written and
 * committed in one synchronous transaction. No transaction stays open across a turn of the
 * event loop, so a harness paused between turns (SIGSTOP, a debugger) holds no lock on the file.
 */
export class SqlHarnessStore implements HarnessStore {
  readonly #driver: SqlDriver;
  readonly #get: string;
  readonly #put: string;
  readonly #delete: string;
  readonly #deleteRange: string;
  readonly #deleteFrom: string;
  readonly #lists: string[] = [];
  readonly singleWriter: boolean;
  /** Group commit (the driver can hold a transaction open, and it was not turned off). */
  readonly writeGrouped?: (batch: readonly StoreOp[]) => Promise<void>;
  /** The transaction open for group commit, and the batches in it. */
  #group: CommitGroup | undefined;
  /**
   * The conditions the open group's transaction has seen hold, by key, with the text held: the
   * transaction has the write lock, so they hold until one of its own writes changes the key
   * (a harness's epoch check then costs one read per group, not one per batch).
   */
  #held: Map<string, string | undefined> | undefined;
  /**
   * The batches of a burst, waiting in memory for the turn's end: every read and `write` writes
   * and commits them first, so this store's reads see them at once.
   */
  #pending: PendingBatch[] | undefined;
  readonly #flushPending = () => this.#commitPending();
  /** A group committed in this turn: the next batches wait, in memory, for the turn's end. */
  readonly #burst = new TurnBurst();
  /**
   * Why the last group's commit failed, until every microtask has run: its writers reset what
   * they decided on its batches in their rejection handlers, and no batch may be decided on
   * that state before.
   */
  #failure: { error: unknown } | undefined;
  readonly #flush = () => this.#commitGroup();
  #closed = false;

  /** Uses `driver`, creating the table when it is missing. */
  constructor(driver: SqlDriver, options: SqlHarnessStoreOptions = {}) {
    const table = options.table ?? DEFAULT_STORE_TABLE;
    if (!/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(table)) {
      throw new InvalidStoreRequestError(
        "option",
        `table ${JSON.stringify(table)} is not a plain SQL name`,
      );
    }
    this.#driver = driver;
    this.singleWriter = options.singleWriter === true;
    if (
      options.groupCommit !== false && driver.begin !== undefined &&
      driver.commit !== undefined && driver.rollback !== undefined
    ) {
      this.writeGrouped = (batch) => this.#writeGrouped(batch);
    }
    try {
      // One statement: it waits for the write lock (the busy timeout) when the table is missing,
      // and finds the table another connection made meanwhile (SQLite prepares it again).
      driver.exec(
        `CREATE TABLE IF NOT EXISTS ${table} (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID`,
      );
    } catch (error) {
      throw busyOr(error);
    }
    this.#get = `SELECT value FROM ${table} WHERE key = ?`;
    this.#put =
      `INSERT INTO ${table} (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`;
    this.#delete = `DELETE FROM ${table} WHERE key = ?`;
    this.#deleteRange = `DELETE FROM ${table} WHERE key >= ? AND key < ?`;
    this.#deleteFrom = `DELETE FROM ${table} WHERE key >= ?`;
    for (let shape = 0; shape < 8; shape++) {
      this.#lists.push(
        `SELECT key, value FROM ${table} WHERE key ${shape & RANGE_EXCLUSIVE_LOW ? ">" : ">="} ?` +
          (shape & RANGE_HAS_HIGH ? " AND key < ?" : "") +
          ` ORDER BY key ${shape & RANGE_REVERSE ? "DESC" : "ASC"} LIMIT ?`,
      );
    }
  }

  get<T = unknown>(key: string): T | undefined {
    this.#open();
    checkKey(key);
    if (this.#pending !== undefined) this.#commitPending();
    let text: string | undefined;
    try {
      text = this.#valueOf(key);
    } catch (error) {
      throw busyOr(error);
    }
    return text === undefined ? undefined : JSON.parse(text) as T;
  }

  list<T = unknown>(prefix: string, options?: ListOptions): [string, T][] {
    this.#open();
    checkList(prefix, options);
    if (this.#pending !== undefined) this.#commitPending();
    const { low, high, shape } = keyRange(prefix, options);
    const limit = options?.limit ?? -1;
    if (limit === 0) return [];
    const params: SqlValue[] = high === undefined ? [low, limit] : [low, high, limit];
    const rows = this.#read(this.#lists[shape], params);
    const out: [string, T][] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      out[i] = [rows[i].key as string, JSON.parse(rows[i].value as string) as T];
    }
    return out;
  }

  write(batch: readonly StoreOp[]): void {
    this.#open();
    checkBatch(batch);
    if (batch.length === 0) return;
    // Every key and value is checked (and serialized) before the transaction starts.
    const { texts, checks } = batchTexts(batch);
    if (this.#pending !== undefined) this.#commitPending();
    try {
      this.#writeNow(batch, texts, checks);
    } catch (error) {
      throw busyOr(error);
    }
  }

  #writeNow(
    batch: readonly StoreOp[],
    texts: (string | undefined)[],
    checks: number[] | undefined,
  ): void {
    if (this.#group !== undefined) {
      // Joins the batches waiting in the open transaction, and commits them all now.
      this.#applyInGroup(batch, texts, checks);
      this.#commitGroup(true);
      return;
    }
    if (batch.length === 1 && checks === undefined) {
      // One statement is atomic on its own.
      this.#apply(batch[0], texts[0]);
      return;
    }
    this.#driver.transaction(() => {
      // The conditions first, inside the transaction that holds the write lock: no other
      // connection can change a checked key between the comparison and the writes.
      if (checks) { for (const i of checks) this.#check(batch[i] as CheckOp, texts[i]); }
      for (let i = 0; i < batch.length; i++) {
        if (checks === undefined || !("check" in batch[i])) this.#apply(batch[i], texts[i]);
      }
    });
  }

  close(): void {
    if (this.#closed) return;
    if (this.#pending !== undefined) this.#commitPending();
    if (this.#group !== undefined) {
      try {
        this.#commitGroup(true);
      } catch {
        // The waiting batches were refused to their writers.
      }
    }
    this.#closed = true;
    this.#driver.close?.();
  }

  #writeGrouped(batch: readonly StoreOp[]): Promise<void> {
    this.#open();
    if (this.#failure !== undefined) throw this.#failure.error;
    checkBatch(batch);
    const { texts, checks } = batchTexts(batch);
    let group = this.#group;
    if (group === undefined && (this.#burst.active || this.#pending !== undefined)) {
      // A burst: the batch waits in memory, in order behind the others, not in an open
      // transaction (which would hold the file's write lock across the turn).
      let pending = this.#pending;
      if (pending === undefined) {
        pending = this.#pending = [];
        afterTurn(this.#flushPending);
      }
      const waiting = pending;
      return new Promise<void>((resolve, reject) => {
        waiting.push({ batch, texts, checks, resolve, reject });
      });
    }
    if (group === undefined) {
      try {
        this.#driver.begin!();
      } catch (error) {
        throw busyOr(error);
      }
      let resolve!: () => void;
      let reject!: (error: unknown) => void;
      const done = new Promise<void>((yes, no) => {
        resolve = yes;
        reject = no;
      });
      group = this.#group = { done, resolve, reject };
      this.#burst.defer(this.#flush);
    }
    this.#applyInGroup(batch, texts, checks);
    return group.done;
  }

  /**
   * Applies a batch in the open group's transaction: a failed condition refuses it alone
   * (checked before anything of it is written); a failure midway rolls the whole group back.
   */
  #applyInGroup(
    batch: readonly StoreOp[],
    texts: (string | undefined)[],
    checks: number[] | undefined,
  ): void {
    this.#checkHeld(batch, texts, checks);
    try {
      this.#applyHeld(batch, texts, checks);
    } catch (error) {
      this.#abortGroup(error);
      throw error;
    }
  }

  /** Checks a batch's conditions in the open transaction, each key once while it holds. */
  #checkHeld(
    batch: readonly StoreOp[],
    texts: (string | undefined)[],
    checks: number[] | undefined,
  ): void {
    if (!checks) return;
    for (const i of checks) {
      const { check } = batch[i] as CheckOp;
      const held = this.#held;
      if (held !== undefined && held.has(check) && held.get(check) === texts[i]) continue;
      this.#check(batch[i] as CheckOp, texts[i]);
      (this.#held ??= new Map()).set(check, texts[i]);
    }
  }

  /** Applies a checked batch's writes in the open transaction. */
  #applyHeld(
    batch: readonly StoreOp[],
    texts: (string | undefined)[],
    checks: number[] | undefined,
  ): void {
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i];
      if (checks !== undefined && "check" in op) continue;
      const held = this.#held;
      if (held !== undefined) {
        if ("put" in op) held.delete(op.put);
        else if ("delete" in op) held.delete(op.delete);
        else held.clear();
      }
      this.#apply(op, texts[i]);
    }
  }

  /**
   * Writes and commits the burst's waiting batches in one synchronous transaction: a failed
   * condition refuses its batch and those written after it (they may have been decided on it;
   * as the PostgreSQL store does), those before it are committed; any other failure refuses
   * them all.
   */
  #commitPending(): void {
    const pending = this.#pending;
    if (pending === undefined) return;
    this.#pending = undefined;
    this.#burst.mark();
    if (this.#closed) {
      const error = new StoreClosedError();
      for (const batch of pending) batch.reject(error);
      return;
    }
    let refused: StoreConditionError | undefined;
    let kept = pending.length;
    let begun = false;
    try {
      this.#driver.begin!();
      begun = true;
      for (let i = 0; i < pending.length; i++) {
        const { batch, texts, checks } = pending[i];
        try {
          this.#checkHeld(batch, texts, checks);
        } catch (error) {
          if (!(error instanceof StoreConditionError)) throw error;
          refused = error;
          kept = i;
          break;
        }
        this.#applyHeld(batch, texts, checks);
      }
      this.#driver.commit!();
    } catch (error) {
      this.#held = undefined;
      if (begun) this.#rollback();
      const failure = busyOr(error);
      this.#failedAll(failure, pending.map((batch) => batch.reject));
      return;
    }
    this.#held = undefined;
    for (let i = 0; i < pending.length; i++) {
      if (i < kept) pending[i].resolve();
      else pending[i].reject(refused);
    }
  }

  /** Commits the open group (if still open); `rethrow`: a failed commit throws here too. */
  #commitGroup(rethrow = false): void {
    const group = this.#group;
    if (group === undefined) return;
    this.#group = undefined;
    this.#held = undefined;
    this.#burst.mark();
    try {
      this.#driver.commit!();
    } catch (cause) {
      const error = busyOr(cause);
      this.#rollback();
      this.#failed(group, error);
      if (rethrow) throw error;
      return;
    }
    group.resolve();
  }

  #abortGroup(error: unknown): void {
    const group = this.#group;
    if (group === undefined) return;
    this.#group = undefined;
    this.#held = undefined;
    this.#rollback();
    this.#failed(group, error);
  }

  #failed(group: CommitGroup, error: unknown): void {
    this.#failedAll(error, [group.reject]);
  }

  #failedAll(error: unknown, rejects: ((error: unknown) => void)[]): void {
    const failure = { error };
    this.#failure = failure;
    // A timer runs after the microtasks, the group's rejection handlers among them.
    setTimeout(() => {
      if (this.#failure === failure) this.#failure = undefined;
    }, 0);
    for (const reject of rejects) reject(error);
  }

  #rollback(): void {
    try {
      this.#driver.rollback!();
    } catch {
      // The transaction is already gone (SQLite rolled it back itself).
    }
  }

  #apply(op: StoreOp, text: string | undefined): void {
    const driver = this.#driver;
    if (text !== undefined) {
      driver.run(this.#put, [(op as { put: string }).put, text]);
    } else if ("delete" in op) {
      driver.run(this.#delete, [op.delete]);
    } else {
      const { deletePrefix } = op as { deletePrefix: string };
      const end = prefixEnd(deletePrefix);
      if (end === undefined) driver.run(this.#deleteFrom, [deletePrefix]);
      else driver.run(this.#deleteRange, [deletePrefix, end]);
    }
  }

  #check(op: CheckOp, expected: string | undefined): void {
    if (this.#valueOf(op.check) !== expected) throw new StoreConditionError(op.check);
  }

  /** The text `key` holds, read with the driver's one-row query when it has one. */
  #valueOf(key: string): string | undefined {
    const driver = this.#driver;
    if (driver.get !== undefined) return driver.get(this.#get, [key])?.value as string | undefined;
    const rows = driver.all(this.#get, [key]);
    return rows.length === 0 ? undefined : rows[0].value as string;
  }

  /** A query's rows; a lock held past the busy timeout is {@linkcode StoreBusyError}. */
  #read(sql: string, params: readonly SqlValue[]): SqlRow[] {
    try {
      return this.#driver.all(sql, params);
    } catch (error) {
      throw busyOr(error);
    }
  }

  #open(): void {
    if (this.#closed) throw new StoreClosedError();
  }
}

/**
 * `error` as a {@linkcode StoreBusyError} when it says another connection holds the file's lock
 * (`SQLITE_BUSY`, as node:sqlite, bun:sqlite and libsql report it), else `error` itself.
 */
export function busyOr(error: unknown): unknown {
  if (error instanceof StoreBusyError) return error;
  const { code, errcode, message } = (error ?? {}) as {
    code?: unknown;
    errcode?: unknown;
    message?: unknown;
  };
  const busy = code === "SQLITE_BUSY" || errcode === 5 ||
    (typeof message === "string" && /database is locked|SQLITE_BUSY/.test(message));
  return busy ? new StoreBusyError({ cause: error }) : error;
}

/** How a SQLite file store syncs to disk (SQLite's `synchronous` pragma, in WAL mode). */
export type SqliteSynchronous = "normal" | "full";

/** Options of `openSqliteStore` on Node, Deno and Bun. */
export interface SqliteStoreOptions extends SqlHarnessStoreOptions {
  /**
   * `"normal"` (the default): a committed batch is in the write-ahead log before `write`
   * returns, so it survives the process being killed (`kill -9`, a crash, an OOM kill); the
   * last batches before a power loss or kernel crash may be lost (never a torn batch). `"full"`:
   * every commit is also fsynced, so it survives those too, at the price of one fsync per batch.
   */
  readonly synchronous?: SqliteSynchronous;
  /** How long a write waits for another connection's lock on the file, ms. Default 5000. */
  readonly busyTimeoutMs?: number;
}

/** A SQLite file store's pragmas, checked ({@linkcode sqliteFileSettings}). */
export interface SqliteFileSettings {
  readonly busyTimeoutMs: number;
  readonly synchronous: "NORMAL" | "FULL";
}

/** The options' pragmas, checked before the file is opened. */
export function sqliteFileSettings(options: SqliteStoreOptions = {}): SqliteFileSettings {
  const synchronous = options.synchronous ?? "normal";
  if (synchronous !== "normal" && synchronous !== "full") {
    throw new InvalidStoreRequestError("option", `synchronous must be "normal" or "full"`);
  }
  const busy = options.busyTimeoutMs ?? 5000;
  if (!Number.isSafeInteger(busy) || busy < 0) {
    throw new InvalidStoreRequestError("option", "busyTimeoutMs must be an integer ≥ 0");
  }
  return { busyTimeoutMs: busy, synchronous: synchronous === "full" ? "FULL" : "NORMAL" };
}

/**
 * Sets a SQLite file store's pragmas on `driver`: first the busy timeout, so that every later
 * statement waits that long for another connection's lock; then WAL, and the sync level.
 *
 * Switching a file to WAL takes its exclusive lock, and SQLite does not always wait for that lock
 * (seen with node:sqlite and bun:sqlite, the busy timeout set): two harnesses opening one fresh
 * file at once meet there, and one of them (or each) is told "database is locked". So the switch
 * is tried again until the busy timeout has passed; a lock held longer is
 * {@linkcode StoreBusyError}.
 */
export async function configureSqliteFile(
  driver: SqlDriver,
  settings: SqliteFileSettings,
): Promise<void> {
  driver.exec(`PRAGMA busy_timeout = ${settings.busyTimeoutMs};`);
  const deadline = Date.now() + settings.busyTimeoutMs;
  for (let pause = 1;; pause = Math.min(pause * 2, 50)) {
    try {
      driver.exec("PRAGMA journal_mode = WAL;");
      break;
    } catch (error) {
      const failure = busyOr(error);
      if (!(failure instanceof StoreBusyError) || Date.now() + pause > deadline) throw failure;
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
  driver.exec(`PRAGMA synchronous = ${settings.synchronous};`);
}

/** A prepared statement as the file drivers use it (`libsql`, `bun:sqlite`, `node:sqlite`). */
export interface PreparedStatementLike {
  /** Runs the statement. */
  run(...params: SqlValue[]): unknown;
  /** The statement's rows. */
  all(...params: SqlValue[]): unknown[];
  /** The statement's first row (`undefined`, or `null` on Bun, when there is none). */
  get?(...params: SqlValue[]): unknown;
}

/** A SQLite connection with `prepare`/`exec`/`close`: the shape the three file drivers share. */
export interface PreparingDatabaseLike {
  /** A prepared statement. */
  prepare(sql: string): PreparedStatementLike;
  /** Runs statements that return nothing. */
  exec(sql: string): unknown;
  /** Closes the connection. */
  close(): unknown;
}

/**
 * A {@linkcode SqlDriver} over a connection that prepares statements (libsql, bun:sqlite,
 * node:sqlite): statements are prepared once and cached; a transaction is
 * `BEGIN IMMEDIATE` … `COMMIT` (taking the write lock first, so it cannot fail midway on a
 * lock), rolled back when its body throws.
 */
export function preparingDriver(db: PreparingDatabaseLike): SqlDriver {
  const statements = new Map<string, PreparedStatementLike>();
  const statement = (sql: string) => {
    let prepared = statements.get(sql);
    if (prepared === undefined) {
      prepared = db.prepare(sql);
      statements.set(sql, prepared);
    }
    return prepared;
  };
  return {
    exec(sql) {
      db.exec(sql);
    },
    run(sql, params) {
      statement(sql).run(...params);
    },
    all(sql, params) {
      return statement(sql).all(...params) as SqlRow[];
    },
    get(sql, params) {
      const prepared = statement(sql);
      // libsql's `all` goes through a row iterator: a key read with `get` is faster, and so is
      // the write after it (measured in docs/benchmarks.md).
      if (prepared.get === undefined) return prepared.all(...params)[0] as SqlRow | undefined;
      return (prepared.get(...params) ?? undefined) as SqlRow | undefined;
    },
    transaction(body) {
      statement("BEGIN IMMEDIATE").run();
      try {
        body();
        statement("COMMIT").run();
      } catch (error) {
        try {
          statement("ROLLBACK").run();
        } catch {
          // The transaction is already gone (SQLite rolled it back itself).
        }
        throw error;
      }
    },
    begin() {
      statement("BEGIN IMMEDIATE").run();
    },
    commit() {
      statement("COMMIT").run();
    },
    rollback() {
      statement("ROLLBACK").run();
    },
    close() {
      statements.clear();
      // Everything into the main file, the WAL emptied: a copy of the file alone, once the
      // harness is gone, is the whole store (libsql's close leaves the WAL as it is). Another
      // connection still reading (a standby) may keep part of it: then its close does.
      try {
        db.exec("PRAGMA wal_checkpoint(TRUNCATE);");
      } catch {
        // Busy, or not WAL: the WAL stays, and SQLite reads it back at the next open.
      }
      db.close();
    },
  };
}
