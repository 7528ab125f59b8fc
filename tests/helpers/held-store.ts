/**
 * A harness store whose writes the test holds: a memory store with group commit whose writes
 * touching a key under `holding` wait until the test commits or fails them; the others go through
 * at once. For what a harness answers while its store is slow to write (a database's commit).
 */
import { type HarnessStore, MemoryHarnessStore, type StoreOp } from "../../node.ts";

/** A write the test holds: committed (or failed) when the test says. */
export interface HeldWrite {
  readonly batch: readonly StoreOp[];
  commit(): void;
  fail(): void;
}

/**
 * A memory store with group commit whose writes touching a key under `holding` wait until the
 * test commits or fails them; the others go through at once.
 */
export class HeldStore implements HarnessStore {
  readonly #inner = new MemoryHarnessStore({ values: "json" });
  /** Key prefixes whose writes are held (none: every write goes through). */
  holding: string[] = [];
  readonly held: HeldWrite[] = [];
  #heldWaiters: (() => void)[] = [];

  get<T>(key: string) {
    return this.#inner.get<T>(key);
  }
  list<T>(prefix: string, options?: Parameters<HarnessStore["list"]>[1]) {
    return this.#inner.list<T>(prefix, options);
  }
  write(batch: readonly StoreOp[]) {
    return this.#held(batch) ?? this.#inner.write(batch);
  }
  writeGrouped(batch: readonly StoreOp[]): Promise<void> {
    return this.#held(batch) ?? Promise.resolve(this.#inner.write(batch));
  }

  /** Resolves once `count` writes are held. */
  async heldWrites(count: number): Promise<HeldWrite[]> {
    while (this.held.length < count) {
      await new Promise<void>((resolve) => this.#heldWaiters.push(resolve));
    }
    return this.held;
  }

  #held(batch: readonly StoreOp[]): Promise<void> | undefined {
    const touched = batch.some((op) =>
      "put" in op && this.holding.some((prefix) => op.put.startsWith(prefix))
    );
    if (!touched) return undefined;
    return new Promise<void>((resolve, reject) => {
      this.held.push({
        batch,
        commit: () => {
          this.#inner.write(batch);
          resolve();
        },
        fail: () => reject(new Error("the harness store's connection was lost")),
      });
      for (const waiter of this.#heldWaiters.splice(0)) waiter();
    });
  }

  /** Every event stored for `sessionId` (a row may pack several). */
  storedEvents(sessionId: string): unknown[] {
    const rows = this.#inner.list<unknown>(`ev/${sessionId}/`);
    return rows.flatMap(([, row]) => Array.isArray(row) ? row : [row]);
  }
}
