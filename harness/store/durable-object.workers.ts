/**
 * The harness store in a Durable Object's own storage: {@linkcode openDurableObjectStore}.
 *
 * - A SQLite-backed object (`new_sqlite_classes` in the migrations, the default for new
 *   classes) gets the {@linkcode SqlHarnessStore} over `ctx.storage.sql`: the same table and
 *   statements as the SQLite file store, every method synchronous, a batch in
 *   `ctx.storage.transactionSync`.
 * - An object of an older key–value class (`new_classes`) gets {@linkcode DurableObjectKvStore}
 *   over the storage's key–value API: the same keys and JSON text, a batch in
 *   `ctx.storage.transaction`, every method returning a promise, values of at most 128 KiB.
 *
 * Either way the data outlives the object's eviction, and the runtime's output gate holds back
 * what the object sends after a write until that write is durable.
 *
 * @module
 */
import {
  batchTexts,
  checkBatch,
  checkKey,
  checkList,
  compareKeys,
  type HarnessStore,
  InvalidStoreRequestError,
  type ListOptions,
  StoreClosedError,
  StoreConditionError,
  type StoreOp,
} from "./store.ts";
import { type SqlDriver, SqlHarnessStore, type SqlRow, type SqlValue } from "./sql.ts";

/** A Durable Object's `ctx.storage.sql` (the members this code calls). */
export interface DurableObjectSqlLike {
  /** Runs one statement with its bindings. */
  exec(query: string, ...bindings: SqlValue[]): { toArray(): SqlRow[] };
}

/** A transaction of the key–value API (the members this code calls). */
export interface DurableObjectTransactionLike {
  /** One value. */
  get<T = unknown>(key: string): Promise<T | undefined>;
  /** Writes one value. */
  put(key: string, value: unknown): Promise<void>;
  /** Deletes keys; resolves with how many existed. */
  delete(keys: string[]): Promise<number>;
  /** Entries in key order, within `options`. */
  list<T = unknown>(options: DurableObjectListOptions): Promise<Map<string, T>>;
}

/** Options of the key–value API's `list`. */
export interface DurableObjectListOptions {
  /** Only keys with this prefix. */
  prefix?: string;
  /** Only keys ≥ this one. */
  start?: string;
  /** Only keys < this one. */
  end?: string;
  /** Highest key first. */
  reverse?: boolean;
  /** At most this many. */
  limit?: number;
}

/** A Durable Object's `ctx.storage` (the members this code calls). */
export interface DurableObjectStoreStorage extends DurableObjectTransactionLike {
  /** SQLite-backed objects only (on others, using it throws). */
  readonly sql?: DurableObjectSqlLike;
  /** Runs `body` as one synchronous transaction (SQLite-backed objects). */
  transactionSync?<T>(body: () => T): T;
  /** Runs `body` as one transaction of the key–value API. */
  transaction<T>(body: (txn: DurableObjectTransactionLike) => Promise<T>): Promise<T>;
}

/** Options of {@linkcode openDurableObjectStore}. */
export interface DurableObjectStoreOptions {
  /**
   * `"sql"`: `ctx.storage.sql` (SQLite-backed objects); `"kv"`: the key–value API (any object).
   * Default: `"sql"` when the object has SQL storage, else `"kv"`.
   */
  readonly api?: "sql" | "kv";
  /** The table of the `"sql"` store. Default `bma_harness_store`. */
  readonly table?: string;
  /** The key prefix of the `"kv"` store, to share the storage with other data. Default `""`. */
  readonly prefix?: string;
}

/**
 * Opens the harness store in the storage of a Durable Object (`ctx.storage`, in its
 * constructor: cheap, so an evicted object reopens it on every wake-up).
 *
 * ```ts
 * import { openDurableObjectStore } from "bma-executor-sdk/workers";
 * export class MyObject {
 *   constructor(ctx: DurableObjectState) {
 *     this.store = openDurableObjectStore(ctx.storage);
 *   }
 * }
 * ```
 */
export function openDurableObjectStore(
  storage: DurableObjectStoreStorage,
  options: DurableObjectStoreOptions = {},
): HarnessStore {
  const api = options.api ?? (hasSql(storage) ? "sql" : "kv");
  if (api === "sql") {
    return new SqlHarnessStore(durableObjectSqlDriver(storage), {
      table: options.table,
      singleWriter: true,
    });
  }
  if (api === "kv") return new DurableObjectKvStore(storage, options.prefix);
  throw new InvalidStoreRequestError("option", `api must be "sql" or "kv"`);
}

/** Whether the object's storage is SQLite-backed (its `sql` answers). */
function hasSql(storage: DurableObjectStoreStorage): boolean {
  if (storage.sql === undefined || storage.transactionSync === undefined) return false;
  try {
    storage.sql.exec("SELECT 1").toArray();
    return true;
  } catch {
    return false;
  }
}

/** The {@linkcode SqlDriver} over a SQLite-backed object's `ctx.storage.sql`. */
export function durableObjectSqlDriver(storage: DurableObjectStoreStorage): SqlDriver {
  const sql = storage.sql;
  const transactionSync = storage.transactionSync?.bind(storage);
  if (sql === undefined || transactionSync === undefined) {
    throw new InvalidStoreRequestError("option", "this Durable Object's storage has no SQL API");
  }
  return {
    exec(query) {
      sql.exec(query);
    },
    run(query, params) {
      sql.exec(query, ...params);
    },
    all(query, params) {
      return sql.exec(query, ...params).toArray();
    },
    transaction(body) {
      transactionSync(body);
    },
  };
}

/** The most keys one key–value call takes. */
const KV_BATCH = 128;

/**
 * A {@linkcode HarnessStore} over a Durable Object's key–value API (for objects whose class
 * is not SQLite-backed). Values are kept as JSON text; every method returns a promise.
 */
export class DurableObjectKvStore implements HarnessStore {
  readonly #storage: DurableObjectStoreStorage;
  readonly #prefix: string;
  /** A Durable Object runs as one instance at a time: no second harness reaches its storage. */
  readonly singleWriter = true;
  #tail: Promise<void> = Promise.resolve();
  #closed = false;

  /** A store over the key–value API of `storage`, its keys under `prefix`. */
  constructor(storage: DurableObjectStoreStorage, prefix = "") {
    this.#storage = storage;
    this.#prefix = prefix;
  }

  async get<T = unknown>(key: string): Promise<T | undefined> {
    this.#open();
    checkKey(key);
    const text = await this.#storage.get<string>(this.#prefix + key);
    return text === undefined ? undefined : JSON.parse(text) as T;
  }

  async list<T = unknown>(prefix: string, options?: ListOptions): Promise<[string, T][]> {
    this.#open();
    checkList(prefix, options);
    if (options?.limit === 0) return [];
    const base = this.#prefix;
    const query: DurableObjectListOptions = { prefix: base + prefix };
    const after = options?.after;
    // The least string after `after` is `after` + U+0000, which no key contains.
    if (after !== undefined && compareKeys(after, prefix) >= 0) {
      query.start = `${base}${after}\u0000`;
    }
    if (options?.before !== undefined) query.end = base + options.before;
    if (options?.reverse) query.reverse = true;
    if (options?.limit !== undefined) query.limit = options.limit;
    const found = await this.#storage.list<string>(query);
    const out: [string, T][] = [];
    for (const [key, text] of found) out.push([key.slice(base.length), JSON.parse(text) as T]);
    return out;
  }

  async write(batch: readonly StoreOp[]): Promise<void> {
    this.#open();
    checkBatch(batch);
    if (batch.length === 0) return;
    const { texts } = batchTexts(batch);
    const base = this.#prefix;
    // One transaction at a time, in call order: a later batch never overtakes an earlier one.
    const previous = this.#tail;
    let done!: () => void;
    this.#tail = new Promise<void>((resolve) => (done = resolve));
    await previous;
    try {
      await this.#transaction(batch, texts, base);
    } finally {
      done();
    }
  }

  async #transaction(
    batch: readonly StoreOp[],
    texts: (string | undefined)[],
    base: string,
  ): Promise<void> {
    await this.#storage.transaction(async (txn) => {
      // The conditions first: a failed one throws before anything is written.
      for (let i = 0; i < batch.length; i++) {
        const op = batch[i];
        if (!("check" in op)) continue;
        if (await txn.get<string>(base + op.check) !== texts[i]) {
          throw new StoreConditionError(op.check);
        }
      }
      for (let i = 0; i < batch.length; i++) {
        const op = batch[i];
        const text = texts[i];
        if ("check" in op) continue;
        if (text !== undefined) {
          await txn.put(base + (op as { put: string }).put, text);
        } else if ("delete" in op) {
          await txn.delete([base + op.delete]);
        } else {
          const prefix = base + (op as { deletePrefix: string }).deletePrefix;
          for (;;) {
            const keys = [...(await txn.list({ prefix, limit: KV_BATCH })).keys()];
            if (keys.length > 0) await txn.delete(keys);
            if (keys.length < KV_BATCH) break;
          }
        }
      }
    });
  }

  close(): void {
    this.#closed = true;
  }

  #open(): void {
    if (this.#closed) throw new StoreClosedError();
  }
}
