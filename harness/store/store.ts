/**
 * The {@linkcode HarnessStore}: what a harness must remember across a restart (executors and
 * their leases, sessions, tool calls and their results, event logs and acknowledged sequences,
 * interactions, deadlines), behind the smallest interface that maps onto any database: a
 * key–value store of JSON values with ordered prefix listing and atomic batches.
 *
 * - **Keys** are non-empty strings without U+0000 and without lone surrogates (well-formed
 *   UTF-16, so every key has one UTF-8 form). They sort by code point, which is the order of
 *   their UTF-8 bytes: SQLite's `BINARY` collation, PostgreSQL's `COLLATE "C"` on a UTF-8
 *   database, Durable Object storage, Redis sorted sets by `ZRANGEBYLEX`, DynamoDB and
 *   FoundationDB all order them so. (JavaScript's `<` compares UTF-16 code units, which differs
 *   for characters above U+FFFF against U+E000–U+FFFF: use {@linkcode compareKeys}.)
 * - **Values** are JSON: what `JSON.stringify` writes and `JSON.parse` reads back. A store may
 *   keep the object it is given (the memory store does) or its JSON text (SQLite, Durable
 *   Objects): never mutate a value after writing it or one that `get`/`list` returned; write a
 *   new one. `undefined` is not a value (delete the key instead).
 * - **Batches** are atomic: every operation of a {@linkcode HarnessStore.write} is applied, in
 *   order, or none is. A batch that fails (a key or value refused, the database failing) leaves
 *   the store as it was.
 * - **Order and visibility**: writes are applied in the order `write` is called, and a `get` or
 *   `list` called after a `write` returned (or its promise resolved) sees it.
 * - **Synchronous answers**: a method may return its answer directly instead of a promise. The
 *   memory, SQLite and Durable Object stores do, so a harness deciding over them takes no
 *   microtask per read or write; it awaits only a store that returns a promise (a network
 *   database). Test with {@linkcode isPromiseLike}, never `await` by default on a hot path.
 *
 * @module
 */
import { LocalError } from "../../protocol/errors.ts";

/** A value, or a promise of it: what a store that may answer synchronously returns. */
export type MaybePromise<T> = T | Promise<T>;

/** Options of {@linkcode HarnessStore.list}. Bounds apply whatever the direction. */
export interface ListOptions {
  /** Only keys after this one (exclusive lower bound): the last key of a previous page, forward. */
  readonly after?: string;
  /** Only keys before this one (exclusive upper bound): the last key of a previous page, reverse. */
  readonly before?: string;
  /** At most this many entries (a non-negative integer). Default: all. */
  readonly limit?: number;
  /** Highest key first. Default false (lowest first). */
  readonly reverse?: boolean;
}

/** Sets `put` to `value`. */
export interface PutOp {
  /** The key to set. */
  readonly put: string;
  /** Its new value (JSON). */
  readonly value: unknown;
}

/** Removes `delete` (nothing happens when it is absent). */
export interface DeleteOp {
  /** The key to remove. */
  readonly delete: string;
}

/** Removes every key that starts with `deletePrefix` (non-empty). */
export interface DeletePrefixOp {
  /** The prefix of the keys to remove. */
  readonly deletePrefix: string;
}

/**
 * A condition of its batch: the batch applies only while `check` holds `value` (its JSON text
 * equal to `JSON.stringify(value)`; `value` absent: `check` has none). Otherwise nothing of the
 * batch is written and `write` throws {@linkcode StoreConditionError}. This compare-and-set is
 * the store's fencing primitive: a harness puts one before each of its batches, so that a
 * harness that lost the store to another writes nothing more (see `docs/store.md`, "One
 * writer").
 */
export interface CheckOp {
  /** The key whose value is compared. */
  readonly check: string;
  /** The value it must hold (JSON); absent: the key must have none. */
  readonly value?: unknown;
}

/** One operation of an atomic batch. */
export type StoreOp = PutOp | DeleteOp | DeletePrefixOp | CheckOp;

/**
 * Where a harness keeps what must survive a restart. Implementations: `MemoryHarnessStore`
 * (the default; gone with the process), `openSqliteStore(path)` from the Node, Deno and Bun
 * entry points (one file), and `openDurableObjectStore(ctx.storage)` on Workers. Any other
 * database fits: see the README's "Harness store" section for a table and its three
 * statements.
 */
export interface HarnessStore {
  /** The value of `key`, or `undefined` when it has none. */
  get<T = unknown>(key: string): MaybePromise<T | undefined>;
  /**
   * The entries whose key starts with `prefix` (`""`: every key), ordered by key (code point
   * order; highest first with `reverse`), within the bounds and limit of `options`.
   */
  list<T = unknown>(prefix: string, options?: ListOptions): MaybePromise<[string, T][]>;
  /** Applies `batch` atomically, in order. An empty batch does nothing. */
  write(batch: readonly StoreOp[]): MaybePromise<void>;
  /**
   * Group commit (optional): applies `batch` now, in order with every other write (a refused
   * batch throws now, or rejects alone, and changes nothing; this store's reads see the batch
   * at once), and
   * resolves once it is durable, committed in one transaction with the batches written beside
   * it (those of one turn of the event loop). A rejection means that none of that transaction's
   * batches was kept: whatever was decided on them must be read back from the store. A `write`
   * while batches wait joins them and commits them all before it returns.
   */
  writeGrouped?(batch: readonly StoreOp[]): Promise<void>;
  /** Releases the store (closes the database file). Later calls throw `StoreClosedError`. */
  close?(): MaybePromise<void>;
  /**
   * True when no second harness can ever reach this store while one runs: a Durable Object's
   * storage (the platform runs at most one instance of an object). A harness then does not
   * claim it (see `docs/store.md`, "One writer"). Default false: a harness claims the store.
   */
  readonly singleWriter?: boolean;
}

/** What was wrong with a store call's arguments. */
export type InvalidStoreRequestReason = "key" | "value" | "op" | "option";

/**
 * A store call was refused before anything was written: a key that is not a non-empty
 * well-formed string without U+0000, a value JSON cannot represent, an operation that is none
 * of put / delete / deletePrefix, or a bad list option.
 */
export class InvalidStoreRequestError extends LocalError {
  /** Which argument was refused. */
  readonly reason: InvalidStoreRequestReason;
  /** Which argument was refused, and what is wrong with it. */
  constructor(reason: InvalidStoreRequestReason, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "InvalidStoreRequestError";
    this.reason = reason;
  }
}

/** A batch's {@linkcode CheckOp} did not hold: nothing of the batch was written. */
export class StoreConditionError extends LocalError {
  /** The key whose value differed. */
  readonly key: string;
  /** The key that did not hold the value its batch expected. */
  constructor(key: string) {
    super(`the harness store's ${JSON.stringify(key)} does not hold the expected value`);
    this.name = "StoreConditionError";
    this.key = key;
  }
}

/** The store was closed. */
export class StoreClosedError extends LocalError {
  constructor() {
    super("the harness store is closed");
    this.name = "StoreClosedError";
  }
}

/**
 * The store's database is locked by another connection, past the store's wait for it (SQLite's
 * `SQLITE_BUSY`, "database is locked"): another process holds its write lock.
 */
export class StoreBusyError extends LocalError {
  /** The driver's error as `cause`. */
  constructor(options?: { cause?: unknown }) {
    super("the harness store's database is locked by another connection", options);
    this.name = "StoreBusyError";
  }
}

/**
 * The store failed to record a write (a full disk, a read-only file, a lost database): nothing
 * of it was stored, and a later attempt may succeed. The driver's error is its `cause`.
 */
export class StoreUnavailableError extends LocalError {
  /** The driver's error as `cause`. */
  constructor(options?: { cause?: unknown }) {
    super("the harness store could not record this: try again", options);
    this.name = "StoreUnavailableError";
  }
}

/** Whether `value` is a promise (or any thenable): the one test before awaiting a store. */
export function isPromiseLike<T>(value: MaybePromise<T>): value is Promise<T> {
  return typeof (value as { then?: unknown } | null | undefined)?.then === "function";
}

// A key outside the plain range: U+0000, or a code unit from the surrogates up. Most keys have
// none and pass with this one test.
// deno-lint-ignore no-control-regex
const UNUSUAL = /[\u0000\uD800-\uFFFF]/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether text (already checked) has no character from U+D800 up: its UTF-16 order is its code point order. */
export function isPlainText(text: string): boolean {
  return !UNUSUAL.test(text);
}

/**
 * Whether `key` has a character from U+D800 up (a non-BMP character or U+E000–U+FFFF), where
 * UTF-16 order and code point order can differ. Throws for what is not a key's text.
 */
export function checkKeyText(key: unknown, what: string, allowEmpty = false): boolean {
  if (typeof key !== "string") {
    throw new InvalidStoreRequestError("key", `${what} must be a string`);
  }
  if (key.length === 0 && !allowEmpty) {
    throw new InvalidStoreRequestError("key", `${what} must not be empty`);
  }
  if (!UNUSUAL.test(key)) return false;
  const problem = keyTextProblem(key);
  if (problem !== undefined) throw new InvalidStoreRequestError("key", `${what} ${problem}`);
  return true;
}

/**
 * Why `text` cannot be (part of) a key, or `undefined` when it can: U+0000, or a lone surrogate.
 * The harness asks it of the ids others choose (a brain's session or tool call id, an
 * executor's) before they reach a store, so that such an id is refused as bad input, not
 * taken for a failing store.
 */
export function keyTextProblem(text: string): string | undefined {
  if (!UNUSUAL.test(text)) return undefined;
  if (text.includes("\u0000")) return "must not contain U+0000";
  if (LONE_SURROGATE.test(text)) return "has a lone surrogate (not UTF-16)";
  return undefined;
}

/** Checks a key (non-empty, no U+0000, well-formed). */
export function checkKey(key: unknown): asserts key is string {
  checkKeyText(key, "a key");
}

/** Checks the prefix and options of a `list` call. */
export function checkList(prefix: unknown, options: ListOptions | undefined): void {
  checkKeyText(prefix, "a prefix", true);
  if (options === undefined) return;
  if (options.after !== undefined) checkKeyText(options.after, "list option after", true);
  if (options.before !== undefined) checkKeyText(options.before, "list option before", true);
  const limit = options.limit;
  if (limit !== undefined && (!Number.isSafeInteger(limit) || limit < 0)) {
    throw new InvalidStoreRequestError("option", "list option limit must be an integer ≥ 0");
  }
}

/**
 * Compares two keys by code point (the order of their UTF-8 bytes): negative when `a` sorts
 * first, 0 when equal, positive otherwise.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = a.length < b.length ? a.length : b.length;
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codeUnitRank(x) - codeUnitRank(y);
  }
  return a.length - b.length;
}

/**
 * A code unit's rank in code point order: surrogates (the halves of U+10000 and up) after
 * U+E000–U+FFFF. Applied to every unit of a string, it maps code point order onto plain
 * UTF-16 order.
 */
export function codeUnitRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

/**
 * The smallest string greater than every string that starts with `prefix`, in code point
 * order; `undefined` when there is none (`""`, or only U+10FFFF characters).
 */
export function prefixEnd(prefix: string): string | undefined {
  let end = prefix;
  while (end.length > 0) {
    const last = end.codePointAt(end.length - 1)!;
    // A low surrogate ends a pair: read the whole character.
    const pair = last >= 0xdc00 && last <= 0xdfff && end.length > 1;
    const cp = pair ? end.codePointAt(end.length - 2)! : last;
    const width = cp > 0xffff ? 2 : 1;
    end = end.slice(0, end.length - width);
    if (cp === 0x10ffff) continue;
    const next = cp === 0xd7ff ? 0xe000 : cp + 1;
    return end + String.fromCodePoint(next);
  }
  return undefined;
}

/** A key range's shape, as bits: its low bound exclusive, a high bound, read in reverse. */
export const RANGE_EXCLUSIVE_LOW = 1;
/** A key range's shape: it has a high bound. */
export const RANGE_HAS_HIGH = 2;
/** A key range's shape: read from its high end. */
export const RANGE_REVERSE = 4;

/**
 * The keys `list(prefix, options)` reads, for a store that asks a database: the low bound (`after`
 * where it lies at or past the prefix: exclusive), the high bound (the prefix's end or an earlier
 * `before`, exclusive; none: to the last key), and the range's shape as bits (`RANGE_*`), by which
 * a SQL store picks its statement.
 */
export function keyRange(
  prefix: string,
  options?: ListOptions,
): { low: string; high: string | undefined; shape: number } {
  let low = prefix;
  let shape = 0;
  const after = options?.after;
  if (after !== undefined && compareKeys(after, low) >= 0) {
    low = after;
    shape |= RANGE_EXCLUSIVE_LOW;
  }
  let high = prefixEnd(prefix);
  const before = options?.before;
  if (before !== undefined && (high === undefined || compareKeys(before, high) < 0)) {
    high = before;
  }
  if (options?.reverse) shape |= RANGE_REVERSE;
  if (high !== undefined) shape |= RANGE_HAS_HIGH;
  return { low, high, shape };
}

/**
 * Serializes a value as stored by the stores that keep JSON text. Throws
 * {@linkcode InvalidStoreRequestError} for what JSON cannot represent (`undefined`, a function,
 * a BigInt, a cycle).
 */
export function encodeValue(key: string, value: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new InvalidStoreRequestError(
      "value",
      `the value of ${JSON.stringify(key)} is not JSON: ${(error as Error).message}`,
      { cause: error },
    );
  }
  if (text === undefined) {
    throw new InvalidStoreRequestError("value", `the value of ${JSON.stringify(key)} is not JSON`);
  }
  return text;
}

/**
 * Checks a value that a store keeps as it is (the memory store): what is plainly not JSON at
 * the top (`undefined`, a function, a symbol, a BigInt) is refused; what is nested is not
 * looked at.
 */
export function checkValue(key: string, value: unknown): void {
  const type = typeof value;
  if (type === "object" || type === "string" || type === "number" || type === "boolean") return;
  throw new InvalidStoreRequestError("value", `the value of ${JSON.stringify(key)} is a ${type}`);
}

/** The kind of an operation, checking its shape and key. */
export function opKind(op: StoreOp): "put" | "delete" | "deletePrefix" | "check" {
  if (op === null || typeof op !== "object") {
    throw new InvalidStoreRequestError("op", "a batch holds operation objects");
  }
  if ("put" in op) {
    checkKey(op.put);
    return "put";
  }
  if ("delete" in op) {
    checkKey(op.delete);
    return "delete";
  }
  if ("deletePrefix" in op) {
    checkKeyText(op.deletePrefix, "deletePrefix");
    return "deletePrefix";
  }
  if ("check" in op) {
    checkKey(op.check);
    return "check";
  }
  throw new InvalidStoreRequestError(
    "op",
    "an operation is { put, value }, { delete }, { deletePrefix } or { check, value }",
  );
}

/**
 * The JSON text a {@linkcode CheckOp} expects (`undefined`: the key must be absent), for a store
 * that compares it with the text it keeps.
 */
export function expectedText(op: CheckOp): string | undefined {
  return op.value === undefined ? undefined : encodeValue(op.check, op.value);
}

/** Checks that `batch` is an array. */
export function checkBatch(batch: readonly StoreOp[]): void {
  if (!Array.isArray(batch)) throw new InvalidStoreRequestError("op", "a batch is an array");
}

/**
 * What a store that keeps JSON text writes and compares for `batch`, checked before anything is
 * written (a refused batch changes nothing): `texts[i]`, each put's value as JSON text and each
 * check's expected text (undefined for a deletion), and the indices of the checks, if any.
 */
export function batchTexts(
  batch: readonly StoreOp[],
): { texts: (string | undefined)[]; checks: number[] | undefined } {
  const texts: (string | undefined)[] = new Array(batch.length);
  let checks: number[] | undefined;
  for (let i = 0; i < batch.length; i++) {
    const op = batch[i];
    const kind = opKind(op);
    if (kind === "put") {
      const { put, value } = op as PutOp;
      texts[i] = encodeValue(put, value);
    } else if (kind === "check") {
      texts[i] = expectedText(op as CheckOp);
      (checks ??= []).push(i);
    }
  }
  return { texts, checks };
}

/** What a {@linkcode watchedStore} is told of each write: `start` before it, `end` once it is over. */
export interface WriteWatcher<T> {
  /** A write of `batch` begins (`write` or `writeGrouped`); returns what `end` is given. */
  start(batch: readonly StoreOp[]): T;
  /** It is over: stored (`failed` false) or refused, thrown or rejected with `error`. */
  end(started: T, failed: boolean, error?: unknown): void;
  /** What a refused write gives its caller instead of `error` (default: `error` itself). */
  refusal?(error: unknown): unknown;
}

/**
 * `store` with each write shown to `watcher` (a synchronous answer at once, a promise when it
 * settles; a refusal still reaches the caller), its reads, `close`, `singleWriter` and group
 * commit passed through: the one shape of the harness's store wrappers (failure reports,
 * metrics, spans).
 */
export function watchedStore<T>(store: HarnessStore, watcher: WriteWatcher<T>): HarnessStore {
  const watch = (
    batch: readonly StoreOp[],
    write: (batch: readonly StoreOp[]) => MaybePromise<void>,
  ): MaybePromise<void> => {
    const started = watcher.start(batch);
    let written: MaybePromise<void>;
    try {
      written = write(batch);
    } catch (error) {
      watcher.end(started, true, error);
      throw watcher.refusal ? watcher.refusal(error) : error;
    }
    if (!isPromiseLike(written)) {
      watcher.end(started, false);
      return written;
    }
    return Promise.resolve(written).then(() => watcher.end(started, false), (error) => {
      watcher.end(started, true, error);
      throw watcher.refusal ? watcher.refusal(error) : error;
    });
  };
  const plain = (batch: readonly StoreOp[]) => store.write(batch);
  const grouped = (batch: readonly StoreOp[]) => store.writeGrouped!(batch);
  return {
    get: (key) => store.get(key),
    list: (prefix, options) => store.list(prefix, options),
    write: (batch) => watch(batch, plain),
    ...(store.writeGrouped
      ? { writeGrouped: (batch) => watch(batch, grouped) as Promise<void> }
      : {}),
    ...(store.close ? { close: () => store.close!() } : {}),
    ...(store.singleWriter ? { singleWriter: true } : {}),
  };
}
