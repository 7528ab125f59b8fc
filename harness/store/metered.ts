/**
 * A store whose writes are timed for the harness's metrics (`bma_store_write_duration_seconds`,
 * `bma_store_write_failures_total`): each batch from the call until it is durable — at once for a
 * synchronous store, when its promise settles for one that answers later (a grouped write when
 * its group committed). Reads pass through untimed.
 */
import type { HarnessMetrics } from "../metrics.ts";
import { type HarnessStore, isPromiseLike, type MaybePromise, type StoreOp } from "./store.ts";

/** `store` with its writes timed into `metrics`. */
export function meteredStore(store: HarnessStore, metrics: HarnessMetrics): HarnessStore {
  const write = (batch: readonly StoreOp[]): MaybePromise<void> => {
    const started = metrics.now();
    let written: MaybePromise<void>;
    try {
      written = store.write(batch);
    } catch (error) {
      metrics.storeWritten(started, true);
      throw error;
    }
    if (!isPromiseLike(written)) {
      metrics.storeWritten(started, false);
      return written;
    }
    return settle(Promise.resolve(written), started);
  };
  const settle = (written: Promise<void>, started: number): Promise<void> =>
    written.then(() => metrics.storeWritten(started, false), (error) => {
      metrics.storeWritten(started, true);
      throw error;
    });
  const writeGrouped = (batch: readonly StoreOp[]): Promise<void> => {
    const started = metrics.now();
    let written: Promise<void>;
    try {
      written = store.writeGrouped!(batch);
    } catch (error) {
      metrics.storeWritten(started, true);
      throw error;
    }
    return settle(written, started);
  };
  return {
    get: (key) => store.get(key),
    list: (prefix, options) => store.list(prefix, options),
    write,
    ...(store.writeGrouped ? { writeGrouped } : {}),
    ...(store.close ? { close: () => store.close!() } : {}),
    ...(store.singleWriter ? { singleWriter: true } : {}),
  };
}
