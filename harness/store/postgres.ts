/**
 * {@linkcode PostgresHarnessStore}: the {@linkcode HarnessStore} over one PostgreSQL table, through
 * a client shaped like `postgres` (porsager's), which `openPostgresStore` loads on Node, Deno and
 * Bun. The table (created on first use):
 *
 * ```sql
 * CREATE TABLE IF NOT EXISTS bma_harness_store (
 *   key text COLLATE "C" PRIMARY KEY,  -- code point order (UTF-8 bytes), as the layout expects
 *   value text NOT NULL                -- JSON text
 * )
 * ```
 *
 * Every method answers with a promise. Writes run one transaction at a time, in call order, on
 * one connection at a time; a read waits for the writes called before it. Batches written with
 * `writeGrouped` while a transaction is in flight (or in one turn of the event loop) are
 * committed together in the next one: group commit, whose size follows the database's latency.
 * A transaction's conditions ({@linkcode CheckOp}, the harness's epoch check) are read inside it,
 * `FOR UPDATE` and under an advisory lock per checked key, so that a harness fenced by another's
 * claim writes nothing, even in a race, and two first claims of an empty table cannot both hold.
 *
 * A transaction that loses its connection is retried with backoff for `retryMs`, then refused;
 * when `COMMIT` was sent, its id tells first whether it committed (`txid_status`), and when that
 * cannot be known it is refused as {@linkcode PostgresCommitUnknownError} (its writers read back
 * what the table holds). Nothing is acknowledged that is not known to be committed.
 *
 * @module
 */
import { LocalError } from "../../protocol/errors.ts";
import { afterTurn } from "../after-turn.ts";
import {
  batchTexts,
  checkBatch,
  checkKey,
  checkList,
  type CheckOp,
  compareKeys,
  type HarnessStore,
  InvalidStoreRequestError,
  type ListOptions,
  prefixEnd,
  StoreClosedError,
  StoreConditionError,
  type StoreOp,
} from "./store.ts";
import { keyRange, RANGE_EXCLUSIVE_LOW, RANGE_HAS_HIGH, RANGE_REVERSE } from "./store.ts";

/** Rows as the client returns them, by column name. */
export type PostgresRows = readonly Record<string, unknown>[];

/** The part of a `postgres` (porsager) client, or of one of its transactions, this store uses. */
export interface PostgresQueryable {
  /** Runs one statement with `$n` parameters: its rows. */
  unsafe(
    query: string,
    params?: readonly unknown[],
    options?: { prepare?: boolean },
  ): PromiseLike<PostgresRows>;
}

/** The part of a `postgres` (porsager) client this store uses: queries, transactions, `end`. */
export interface PostgresClientLike extends PostgresQueryable {
  /** Runs `body` in a transaction on a connection of its own: committed once it resolves. */
  begin<T>(body: (tx: PostgresQueryable) => Promise<T>): PromiseLike<T>;
  /** Closes the client's connections. */
  end?(options?: { timeout?: number }): PromiseLike<void>;
}

/** Options of a {@linkcode PostgresHarnessStore}. */
export interface PostgresStoreOptions {
  /**
   * The table (a plain SQL name, created when missing). Default `bma_harness_store`. Harnesses
   * that share a database each hold a table of their own: a partition (per environment or
   * tenant), with its own claim.
   */
  readonly table?: string;
  /** Group commit (`writeGrouped`). Default true. */
  readonly groupCommit?: boolean;
  /**
   * How long a transaction or read that lost its connection (before `COMMIT`) is retried, with
   * backoff, before it is refused, ms. Default 10 000.
   */
  readonly retryMs?: number;
  /**
   * How long PostgreSQL lets one of this store's transactions sit idle before it ends the
   * session (`idle_in_transaction_session_timeout`, set in each transaction), ms: a harness
   * frozen inside a transaction (SIGSTOP, a paused VM) then loses its locks, so a standby's claim
   * goes on, and the frozen one finds its transaction aborted and its epoch fenced when it wakes.
   * Default 5 000 (a transaction of this store never waits on its client that long).
   *
   * The server's timeout misses a client frozen in the middle of a pipeline (its session is
   * "active", reading the rest): so a transaction of this store that has waited this long on a
   * lock ends the sessions of a harness store that hold it and have been in their transaction
   * this long (`pg_terminate_backend`), whatever state they were frozen in; anyone else's is
   * waited for. `0` turns both off.
   */
  readonly idleInTransactionTimeoutMs?: number;
}

/**
 * The `application_name` of a store's session while it is in one of the store's transactions:
 * what tells a frozen harness's session, which a store may end, from anyone else's.
 */
export const STORE_APPLICATION_NAME = "bma-harness-store";

/** The table a {@linkcode PostgresHarnessStore} uses unless told otherwise. */
export const DEFAULT_POSTGRES_TABLE = "bma_harness_store";

/** How long PostgreSQL lets a store's transaction sit idle by default, ms. */
export const DEFAULT_POSTGRES_IDLE_IN_TRANSACTION_MS = 5_000;

/** How long a store retries what lost its connection by default, ms. */
export const DEFAULT_POSTGRES_RETRY_MS = 10_000;

/** The `postgres` client could not be loaded, or the database refused the store. */
export class PostgresStoreUnavailableError extends LocalError {
  /** Why, and the failure behind it as `cause`. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "PostgresStoreUnavailableError";
  }
}

/** The outcome of a transaction whose connection was lost after `COMMIT` was sent is unknown. */
export class PostgresCommitUnknownError extends LocalError {
  /** The failure of the connection as `cause`. */
  constructor(options?: { cause?: unknown }) {
    super(
      "the connection to PostgreSQL was lost while a transaction committed: it may or may not " +
        "be stored",
      options,
    );
    this.name = "PostgresCommitUnknownError";
  }
}

/** Error codes of a lost (or not yet available) connection: what is retried. */
const CONNECTION_CODES = new Set([
  "CONNECTION_CLOSED",
  "CONNECTION_DESTROYED",
  "CONNECT_TIMEOUT",
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ENOENT",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  // Server shutting down, crashed, or starting up; a serialization failure or deadlock, which
  // rolled the transaction back.
  "57P01",
  "57P02",
  "57P03",
  "40001",
  "40P01",
]);

/** Whether `error` says the connection was lost (or the transaction rolled back): safe to retry. */
export function isRetryablePostgresError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  return CONNECTION_CODES.has(code) || code.startsWith("08");
}

/** A 32-bit FNV-1a hash of `text`'s code units: an advisory lock's key. */
function lockKey(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

/** One batch in a transaction, checked and serialized. */
interface Entry {
  readonly batch: readonly StoreOp[];
  readonly texts: (string | undefined)[];
  readonly checks: number[] | undefined;
  readonly grouped: boolean;
  resolve(): void;
  reject(error: unknown): void;
}

/** The batches of one transaction. */
interface Job {
  readonly entries: Entry[];
  /** No batch joins it any more (a plain write sealed it, or it started). */
  sealed: boolean;
  /** The turn it was opened in has ended (group commit gathers one turn at least). */
  readonly turnEnded: Promise<void>;
  /** Failed before it ran (a transaction before it lost batches it was decided on). */
  poisoned?: { error: unknown };
}

const settled = () => {};
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves once this turn of the event loop has handled its I/O. */
function turnEnded(): Promise<void> {
  return new Promise((resolve) => afterTurn(resolve));
}

/** A {@linkcode HarnessStore} over one PostgreSQL table. Open it with `openPostgresStore`. */
export class PostgresHarnessStore implements HarnessStore {
  readonly #sql: PostgresClientLike;
  readonly #endClient: boolean;
  readonly #retryMs: number;
  /** Sets the transaction's idle timeout: the first statement of each transaction. */
  readonly #idleTimeout: string;
  readonly #idleMs: number;
  readonly #tableLock: number;
  readonly #get: string;
  readonly #lock: string;
  readonly #select: string;
  readonly #upsert: string;
  readonly #deleteKeys: string;
  readonly #deleteRange: string;
  readonly #deleteFrom: string;
  readonly #lists: string[] = [];
  /** Group commit (not turned off). */
  readonly writeGrouped?: (batch: readonly StoreOp[]) => Promise<void>;
  /** The transaction batches join (not started yet). */
  #open: Job | undefined;
  /** The transactions not run yet, in order. */
  readonly #waiting: Job[] = [];
  /** Settles once every transaction queued so far has. */
  #tail: Promise<void> = Promise.resolve();
  /**
   * Why the last transaction of grouped batches failed, until every microtask has run: its
   * writers reset what they decided on its batches in their rejection handlers, and no batch may
   * be decided on that state before.
   */
  #failure: { error: unknown } | undefined;
  #closed = false;

  /**
   * A store over `sql`'s table (which {@linkcode PostgresHarnessStore.open} creates):
   * `endClient`, whether `close()` ends the client (one the store opened itself).
   */
  constructor(sql: PostgresClientLike, options: PostgresStoreOptions = {}, endClient = false) {
    const table = options.table ?? DEFAULT_POSTGRES_TABLE;
    checkTableName(table);
    const retryMs = options.retryMs ?? DEFAULT_POSTGRES_RETRY_MS;
    if (!Number.isSafeInteger(retryMs) || retryMs < 0) {
      throw new InvalidStoreRequestError("option", "retryMs must be an integer ≥ 0");
    }
    this.#sql = sql;
    this.#endClient = endClient;
    this.#retryMs = retryMs;
    const idle = options.idleInTransactionTimeoutMs ?? DEFAULT_POSTGRES_IDLE_IN_TRANSACTION_MS;
    if (!Number.isSafeInteger(idle) || idle < 0) {
      throw new InvalidStoreRequestError(
        "option",
        "idleInTransactionTimeoutMs must be an integer ≥ 0",
      );
    }
    // One statement for both settings, local to the transaction: the timeout, and the name by
    // which another of this store's transactions tells a session of the store from anyone else's.
    this.#idleTimeout = "SELECT set_config('idle_in_transaction_session_timeout', " +
      `'${idle}', true), set_config('application_name', '${STORE_APPLICATION_NAME}', true)`;
    this.#idleMs = idle;
    this.#tableLock = lockKey(table);
    if (options.groupCommit !== false) this.writeGrouped = (batch) => this.#writeGrouped(batch);
    const t = `"${table}"`;
    this.#get = `SELECT value FROM ${t} WHERE key = $1`;
    this.#lock = "SELECT pg_advisory_xact_lock($1::int4, k) FROM " +
      "(SELECT unnest($2::int4[]) AS k ORDER BY 1) AS keys";
    this.#select = `SELECT key, value FROM ${t} WHERE key = ANY($1::text[]) FOR UPDATE`;
    this.#upsert = `INSERT INTO ${t} (key, value) SELECT * FROM unnest($1::text[], $2::text[]) ` +
      "ON CONFLICT (key) DO UPDATE SET value = excluded.value";
    this.#deleteKeys = `DELETE FROM ${t} WHERE key = ANY($1::text[])`;
    this.#deleteRange = `DELETE FROM ${t} WHERE key >= $1 AND key < $2`;
    this.#deleteFrom = `DELETE FROM ${t} WHERE key >= $1`;
    for (let shape = 0; shape < 8; shape++) {
      this.#lists.push(
        `SELECT key, value FROM ${t} WHERE key ${shape & RANGE_EXCLUSIVE_LOW ? ">" : ">="} $1` +
          (shape & RANGE_HAS_HIGH ? " AND key < $2" : "") +
          ` ORDER BY key ${shape & RANGE_REVERSE ? "DESC" : "ASC"} LIMIT $${
            shape & RANGE_HAS_HIGH ? 3 : 2
          }`,
      );
    }
  }

  /**
   * Creates the table of `options.table` when it is missing (under an advisory lock, so that
   * harnesses starting together do not race), checks that its keys sort as `COLLATE "C"`, and
   * returns a store over it.
   */
  static async open(
    sql: PostgresClientLike,
    options: PostgresStoreOptions = {},
    endClient = false,
  ): Promise<PostgresHarnessStore> {
    const store = new PostgresHarnessStore(sql, options, endClient);
    const table = options.table ?? DEFAULT_POSTGRES_TABLE;
    await store.#retrying(() =>
      sql.begin(async (tx) => {
        await tx.unsafe("SELECT pg_advisory_xact_lock($1::int4, $2::int4)", [
          lockKey("bma_harness_store: create"),
          store.#tableLock,
        ]);
        // Created only when missing: `CREATE TABLE IF NOT EXISTS` needs CREATE on the schema
        // even when the table is there, and a role given only the table's rights has none.
        const found = await tx.unsafe("SELECT to_regclass($1) IS NOT NULL AS present", [
          `"${table}"`,
        ]);
        if (found[0]?.present !== true) {
          await tx.unsafe(
            `CREATE TABLE IF NOT EXISTS "${table}" ` +
              `(key text COLLATE "C" PRIMARY KEY, value text NOT NULL)`,
          );
        }
      })
    );
    const rows = await store.#retrying(() =>
      sql.unsafe(
        "SELECT c.collname AS collation FROM pg_attribute a " +
          "JOIN pg_collation c ON c.oid = a.attcollation " +
          "WHERE a.attrelid = to_regclass($1) AND a.attname = 'key'",
        [`"${table}"`],
      )
    );
    const collation = rows[0]?.collation;
    if (collation !== "C" && collation !== "POSIX") {
      throw new PostgresStoreUnavailableError(
        `table ${table}'s key column sorts by collation ${String(collation)}, not "C": ` +
          "keys would list out of order (see docs/store.md)",
      );
    }
    return store;
  }

  get<T = unknown>(key: string): Promise<T | undefined> {
    this.#openCheck();
    checkKey(key);
    return this.#read(this.#get, [key]).then((rows) =>
      rows.length === 0 ? undefined : JSON.parse(rows[0].value as string) as T
    );
  }

  list<T = unknown>(prefix: string, options?: ListOptions): Promise<[string, T][]> {
    this.#openCheck();
    checkList(prefix, options);
    const { low, high, shape } = keyRange(prefix, options);
    const limit = options?.limit;
    if (limit === 0) return Promise.resolve([]);
    const params: unknown[] = high === undefined
      ? [low, limit ?? null]
      : [low, high, limit ?? null];
    return this.#read(this.#lists[shape], params).then((rows) => {
      const out: [string, T][] = new Array(rows.length);
      for (let i = 0; i < rows.length; i++) {
        out[i] = [rows[i].key as string, JSON.parse(rows[i].value as string) as T];
      }
      return out;
    });
  }

  write(batch: readonly StoreOp[]): Promise<void> {
    this.#openCheck();
    checkBatch(batch);
    const { texts, checks } = batchTexts(batch);
    if (batch.length === 0 && this.#open === undefined && this.#waiting.length === 0) {
      return Promise.resolve();
    }
    return this.#enqueue(batch, texts, checks, false);
  }

  /** Lets every queued transaction finish, then closes the client (when the store opened it). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#open) this.#open.sealed = true;
    await this.#tail;
    if (this.#endClient) await this.#sql.end?.({ timeout: 5 });
  }

  #writeGrouped(batch: readonly StoreOp[]): Promise<void> {
    this.#openCheck();
    if (this.#failure !== undefined) throw this.#failure.error;
    checkBatch(batch);
    const { texts, checks } = batchTexts(batch);
    return this.#enqueue(batch, texts, checks, true);
  }

  #enqueue(
    batch: readonly StoreOp[],
    texts: (string | undefined)[],
    checks: number[] | undefined,
    grouped: boolean,
  ): Promise<void> {
    let job = this.#open;
    if (job === undefined || job.sealed) {
      job = { entries: [], sealed: false, turnEnded: grouped ? turnEnded() : Promise.resolve() };
      this.#open = job;
      this.#waiting.push(job);
      const run = this.#tail.then(() => job!.turnEnded).then(() => this.#run(job!));
      this.#tail = run.then(settled, settled);
    }
    // A plain write joins what waits and is committed with it; nothing joins after it.
    if (!grouped) job.sealed = true;
    return new Promise<void>((resolve, reject) => {
      job!.entries.push({ batch, texts, checks, grouped, resolve, reject });
    });
  }

  async #run(job: Job): Promise<void> {
    job.sealed = true;
    if (this.#open === job) this.#open = undefined;
    this.#waiting.shift();
    if (job.poisoned) {
      for (const entry of job.entries) entry.reject(job.poisoned.error);
      return;
    }
    let refusedAt = job.entries.length;
    let refusal: StoreConditionError | undefined;
    try {
      await this.#transact(async (tx) => {
        const found = await this.#checkAll(tx, job.entries);
        refusedAt = found.at;
        refusal = found.refusal;
        const statements = this.#statements(job.entries, refusedAt);
        if (statements.length > 0) {
          // Pipelined; each one's failure is awaited, also when a later one throws at once.
          await Promise.all(statements.map(([sql, params]) => {
            try {
              return Promise.resolve(tx.unsafe(sql, params));
            } catch (error) {
              return Promise.reject(error);
            }
          }));
        }
      });
    } catch (error) {
      this.#failed(job, 0, error);
      return;
    }
    for (let i = 0; i < refusedAt; i++) job.entries[i].resolve();
    if (refusal !== undefined) this.#failed(job, refusedAt, refusal);
  }

  /**
   * Reads the keys the batches check, locked, and finds the first batch whose condition fails
   * (each batch's conditions seen after the writes of the batches before it).
   */
  async #checkAll(
    tx: PostgresQueryable,
    entries: readonly Entry[],
  ): Promise<{ at: number; refusal?: StoreConditionError }> {
    const checked = new Set<string>();
    for (const { batch, checks } of entries) {
      if (checks) { for (const i of checks) checked.add((batch[i] as CheckOp).check); }
    }
    if (checked.size === 0) return { at: entries.length };
    const keys = [...checked].sort(compareKeys);
    const [, rows] = await Promise.all([
      tx.unsafe(this.#lock, [this.#tableLock, keys.map(lockKey)]),
      tx.unsafe(this.#select, [keys]),
    ]);
    const held = new Map<string, string | undefined>();
    for (const key of keys) held.set(key, undefined);
    for (const row of rows) held.set(row.key as string, row.value as string);
    for (let at = 0; at < entries.length; at++) {
      const { batch, texts, checks } = entries[at];
      if (checks) {
        for (const i of checks) {
          const { check } = batch[i] as CheckOp;
          if (held.get(check) !== texts[i]) return { at, refusal: new StoreConditionError(check) };
        }
      }
      for (let i = 0; i < batch.length; i++) {
        const op = batch[i];
        if ("put" in op) {
          if (held.has(op.put)) held.set(op.put, texts[i]);
        } else if ("delete" in op) {
          if (held.has(op.delete)) held.set(op.delete, undefined);
        } else if ("deletePrefix" in op) {
          for (const key of held.keys()) {
            if (key.startsWith(op.deletePrefix)) held.set(key, undefined);
          }
        }
      }
    }
    return { at: entries.length };
  }

  /**
   * The statements that apply the first `count` batches: each key's last put or delete decides
   * it, so a transaction is at most its prefix deletes, one delete of keys and one upsert (in
   * that order: a key put after a prefix delete is put again by the upsert).
   */
  #statements(entries: readonly Entry[], count: number): [string, unknown[]][] {
    const last = new Map<string, string | undefined>();
    const prefixes = new Set<string>();
    for (let e = 0; e < count; e++) {
      const { batch, texts } = entries[e];
      for (let i = 0; i < batch.length; i++) {
        const op = batch[i];
        if ("put" in op) last.set(op.put, texts[i]);
        else if ("delete" in op) last.set(op.delete, undefined);
        else if ("deletePrefix" in op) {
          prefixes.add(op.deletePrefix);
          for (const key of last.keys()) if (key.startsWith(op.deletePrefix)) last.delete(key);
        }
      }
    }
    const statements: [string, unknown[]][] = [];
    for (const prefix of prefixes) {
      const end = prefixEnd(prefix);
      statements.push(
        end === undefined ? [this.#deleteFrom, [prefix]] : [this.#deleteRange, [prefix, end]],
      );
    }
    const deleted: string[] = [];
    const keys: string[] = [];
    const values: string[] = [];
    for (const [key, text] of last) {
      if (text === undefined) deleted.push(key);
      else {
        keys.push(key);
        values.push(text);
      }
    }
    if (deleted.length > 0) statements.push([this.#deleteKeys, [deleted]]);
    if (keys.length > 0) statements.push([this.#upsert, [keys, values]]);
    return statements;
  }

  /**
   * Refuses the batches of `job` from `from` on with `error`; when a grouped batch is among
   * them, also every transaction waiting behind it (its batches were decided on the lost ones).
   */
  #failed(job: Job, from: number, error: unknown): void {
    let grouped = false;
    for (let i = from; i < job.entries.length; i++) {
      grouped ||= job.entries[i].grouped;
      job.entries[i].reject(error);
    }
    if (!grouped) return;
    for (const waiting of this.#waiting) waiting.poisoned ??= { error };
    if (this.#open) this.#open.sealed = true;
    const failure = { error };
    this.#failure = failure;
    // A timer runs after the microtasks, the rejection handlers among them.
    setTimeout(() => {
      if (this.#failure === failure) this.#failure = undefined;
    }, 0);
  }

  /** Runs a read once the writes called before it are done. */
  #read(sql: string, params: unknown[]): Promise<PostgresRows> {
    const query = () => this.#retrying(() => this.#sql.unsafe(sql, params, { prepare: true }));
    if (this.#open === undefined && this.#waiting.length === 0) return query();
    return this.#tail.then(query);
  }

  /**
   * Runs `attempt` again, with backoff, while it fails with a lost connection, for `retryMs`;
   * after that the failure stands.
   */
  async #retrying<T>(attempt: () => PromiseLike<T>): Promise<T> {
    const deadline = Date.now() + this.#retryMs;
    let delay = 50;
    for (;;) {
      try {
        return await attempt();
      } catch (error) {
        if (!isRetryablePostgresError(error) || Date.now() + delay > deadline) throw error;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 1_000);
    }
  }

  /**
   * Runs `body` in a transaction, again with backoff while it fails with a lost connection, for
   * `retryMs`. When the connection was lost once `COMMIT` was sent, the transaction's id tells
   * what became of it (`txid_status`): committed, it is done; aborted, it is run again; unknown
   * within `retryMs`, {@linkcode PostgresCommitUnknownError}.
   */
  async #transact(body: (tx: PostgresQueryable) => Promise<void>): Promise<void> {
    const deadline = Date.now() + this.#retryMs;
    let delay = 50;
    for (;;) {
      let xid: string | undefined;
      let sent = false;
      try {
        await this.#sql.begin(async (tx) => {
          // Pipelined with the rest: a frozen client's transaction is ended by the server.
          const idle = Promise.resolve(tx.unsafe(this.#idleTimeout));
          idle.catch(() => {}); // Its failure fails the transaction: awaited below.
          // Sent first, pipelined with the rest: the id to ask about if the commit's answer is lost,
          // and the session's pid, to find who blocks it.
          let pid: number | undefined;
          const id = Promise.resolve(
            tx.unsafe("SELECT txid_current()::text AS xid, pg_backend_pid() AS pid"),
          ).then(
            (rows) => {
              xid = rows[0]?.xid as string | undefined;
              pid = rows[0]?.pid as number | undefined;
            },
            () => {},
          );
          const watch = this.#idleMs > 0
            ? setInterval(() => void this.#endStuckBlockers(pid), this.#idleMs)
            : undefined;
          try {
            await body(tx);
            await idle;
            await id;
          } finally {
            clearInterval(watch);
          }
          sent = true;
        });
        return;
      } catch (error) {
        if (!isRetryablePostgresError(error)) throw error;
        if (sent) {
          const status = xid === undefined ? undefined : await this.#commitStatus(xid, deadline);
          if (status === "committed") return;
          if (status !== "aborted") throw new PostgresCommitUnknownError({ cause: error });
        }
        if (Date.now() + delay > deadline) throw error;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 1_000);
    }
  }

  /**
   * Ends the sessions of a harness store (named {@linkcode STORE_APPLICATION_NAME} in their
   * transaction) that have blocked session `pid` (this store's transaction) and been in their own
   * transaction for longer than the idle timeout: a harness frozen mid-pipeline holds its locks
   * for as long as it is frozen, and no server timeout ends it. Anyone else's session (a
   * migration, a backup, an operator's `LOCK TABLE`) is waited for, never ended. On another
   * connection of the pool; a failure is left to the transaction's own wait.
   */
  async #endStuckBlockers(pid: number | undefined): Promise<void> {
    if (pid === undefined || this.#closed) return;
    try {
      await this.#sql.unsafe(
        "SELECT pg_terminate_backend(a.pid) FROM pg_stat_activity a " +
          "WHERE a.pid = ANY(pg_blocking_pids($1::int4)) " +
          "AND a.application_name = $3 " +
          "AND now() - a.xact_start > $2::int8 * interval '1 millisecond'",
        [pid, this.#idleMs, STORE_APPLICATION_NAME],
      );
    } catch {
      // The transaction goes on waiting; the next one looks again.
    }
  }

  /** What became of transaction `xid` (`committed`, `aborted`), or undefined when not known in time. */
  async #commitStatus(xid: string, deadline: number): Promise<string | undefined> {
    let delay = 50;
    for (;;) {
      try {
        const rows = await this.#sql.unsafe("SELECT txid_status($1::int8) AS status", [xid]);
        const status = rows[0]?.status;
        if (status !== "in progress") return typeof status === "string" ? status : undefined;
      } catch (error) {
        if (!isRetryablePostgresError(error)) return undefined;
      }
      if (Date.now() + delay > deadline) return undefined;
      await sleep(delay);
      delay = Math.min(delay * 2, 1_000);
    }
  }

  #openCheck(): void {
    if (this.#closed) throw new StoreClosedError();
  }
}

/** Checks that `table` is a plain SQL name (it is quoted as it is). */
export function checkTableName(table: string): void {
  if (typeof table !== "string" || !/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(table)) {
    throw new InvalidStoreRequestError(
      "option",
      `table ${JSON.stringify(table)} is not a plain SQL name`,
    );
  }
}
