/**
 * {@linkcode MemoryHarnessStore}: the default {@linkcode HarnessStore}, in this process's memory
 * (gone when it exits). Every method answers synchronously.
 */
import { SortedKeys } from "./sorted-keys.ts";
import {
  checkBatch,
  checkKey,
  checkList,
  type CheckOp,
  checkValue,
  codeUnitRank,
  encodeValue,
  expectedText,
  type HarnessStore,
  isPlainText,
  type ListOptions,
  opKind,
  StoreClosedError,
  StoreConditionError,
  type StoreOp,
} from "./store.ts";

/** Options of a {@linkcode MemoryHarnessStore}. */
export interface MemoryHarnessStoreOptions {
  /**
   * `"shared"` (the default): the store keeps the very value it is given and `get`/`list` return
   * it (no copy; never mutate it). `"json"`: it keeps each value's JSON text and parses it on
   * every read, as the SQLite and Durable Object stores do — values JSON cannot represent are
   * refused and no caller shares an object with the store (slower; for tests that must see what
   * a database would keep).
   */
  readonly values?: "shared" | "json";
}

/** A {@linkcode HarnessStore} in memory. */
export class MemoryHarnessStore implements HarnessStore {
  readonly #values = new Map<string, unknown>();
  /** Every key in code point order, as ranked strings (see `rankedKey`). */
  readonly #order = new SortedKeys();
  /** The keys whose ranked form differs from the key: ranked → key. */
  readonly #unusual = new Map<string, string>();
  /**
   * Keys written since the last ordered read, not yet in `#order`: they are ordered when a
   * `list` or a `deletePrefix` needs it. A key written and deleted between two such reads (a
   * harness's record of a tool call in flight) never costs an ordered insert.
   */
  readonly #fresh = new Set<string>();
  readonly #json: boolean;
  #closed = false;

  /** An empty store. */
  constructor(options: MemoryHarnessStoreOptions = {}) {
    this.#json = options.values === "json";
  }

  /** How many keys it holds. */
  get size(): number {
    return this.#values.size;
  }

  get<T = unknown>(key: string): T | undefined {
    this.#open();
    checkKey(key);
    const value = this.#values.get(key);
    if (this.#json && value !== undefined) return JSON.parse(value as string) as T;
    return value as T | undefined;
  }

  list<T = unknown>(prefix: string, options?: ListOptions): [string, T][] {
    this.#open();
    checkList(prefix, options);
    this.#orderFresh();
    const start = rankedKey(prefix);
    let low = start;
    let inclusive = true;
    const after = options?.after;
    if (after !== undefined) {
      const ranked = rankedKey(after);
      if (ranked >= low) {
        low = ranked;
        inclusive = false;
      }
    }
    let high = rankedEnd(start);
    const before = options?.before;
    if (before !== undefined) {
      const ranked = rankedKey(before);
      if (high === undefined || ranked < high) high = ranked;
    }
    const keys = this.#order.range(
      low,
      inclusive,
      high,
      options?.reverse === true,
      options?.limit ?? Infinity,
    );
    const out: [string, T][] = new Array(keys.length);
    for (let i = 0; i < keys.length; i++) {
      const key = this.#unusual.get(keys[i]) ?? keys[i];
      const value = this.#values.get(key);
      out[i] = [key, (this.#json ? JSON.parse(value as string) : value) as T];
    }
    return out;
  }

  write(batch: readonly StoreOp[]): void {
    this.#open();
    checkBatch(batch);
    // Everything is checked before anything is applied: a refused batch changes nothing.
    let texts: string[] | undefined;
    let checked = false;
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i];
      const kind = opKind(op);
      if (kind === "check") {
        this.#check(op as CheckOp);
        checked = true;
        continue;
      }
      if (kind !== "put") continue;
      const { put, value } = op as { put: string; value: unknown };
      if (this.#json) (texts ??= [])[i] = encodeValue(put, value);
      else checkValue(put, value);
    }
    for (let i = 0; i < batch.length; i++) {
      const op = batch[i] as {
        put?: string;
        value?: unknown;
        delete?: string;
        deletePrefix?: string;
      };
      if (checked && "check" in op) continue;
      if (op.put !== undefined) {
        if (!this.#values.has(op.put)) this.#fresh.add(op.put);
        this.#values.set(op.put, texts ? texts[i] : op.value);
      } else if (op.delete !== undefined) {
        if (this.#values.delete(op.delete) && !this.#fresh.delete(op.delete)) {
          this.#unindex(op.delete);
        }
      } else {
        this.#orderFresh();
        this.#deletePrefix(op.deletePrefix!);
      }
    }
  }

  close(): void {
    this.#closed = true;
    this.#values.clear();
    this.#unusual.clear();
    this.#fresh.clear();
  }

  /** Throws {@linkcode StoreConditionError} unless the key holds the value `op` expects. */
  #check(op: CheckOp): void {
    const expected = expectedText(op);
    const held = this.#values.get(op.check);
    const text = held === undefined || this.#json
      ? held as string | undefined
      : JSON.stringify(held);
    if (text !== expected) throw new StoreConditionError(op.check);
  }

  /** Puts the keys written since the last ordered read in order. */
  #orderFresh(): void {
    if (this.#fresh.size === 0) return;
    for (const key of this.#fresh) this.#index(key);
    this.#fresh.clear();
  }

  #open(): void {
    if (this.#closed) throw new StoreClosedError();
  }

  #index(key: string): void {
    const ranked = rankedKey(key);
    if (ranked !== key) this.#unusual.set(ranked, key);
    this.#order.insert(ranked);
  }

  #unindex(key: string): void {
    const ranked = rankedKey(key);
    if (ranked !== key) this.#unusual.delete(ranked);
    this.#order.delete(ranked);
  }

  #deletePrefix(prefix: string): void {
    const start = rankedKey(prefix);
    for (const ranked of this.#order.deleteRange(start, rankedEnd(start))) {
      const key = this.#unusual.get(ranked);
      if (key === undefined) {
        this.#values.delete(ranked);
      } else {
        this.#unusual.delete(ranked);
        this.#values.delete(key);
      }
    }
  }
}

/**
 * `key` with every code unit replaced by its rank in code point order, so that JavaScript's
 * `<` on ranked keys is code point order on the keys. A key below U+D800 throughout (nearly
 * every key) is its own ranked form.
 */
function rankedKey(key: string): string {
  if (isPlainText(key)) return key;
  let out = "";
  for (let i = 0; i < key.length; i++) out += String.fromCharCode(codeUnitRank(key.charCodeAt(i)));
  return out;
}

/** The smallest string above every string that starts with ranked `prefix` (UTF-16 order). */
function rankedEnd(prefix: string): string | undefined {
  let end = prefix;
  while (end.length > 0 && end.charCodeAt(end.length - 1) === 0xffff) end = end.slice(0, -1);
  if (end.length === 0) return undefined;
  return end.slice(0, -1) + String.fromCharCode(end.charCodeAt(end.length - 1) + 1);
}
