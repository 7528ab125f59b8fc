/**
 * A store whose writes are timed for the harness's metrics (`bma_store_write_duration_seconds`,
 * `bma_store_write_failures_total`): each batch from the call until it is durable — at once for a
 * synchronous store, when its promise settles for one that answers later (a grouped write when
 * its group committed). Reads pass through untimed.
 */
import type { HarnessMetrics } from "../metrics.ts";
import { type HarnessStore, InvalidStoreRequestError, watchedStore } from "./store.ts";

/** `store` with its writes timed into `metrics`. */
export function meteredStore(store: HarnessStore, metrics: HarnessMetrics): HarnessStore {
  return watchedStore<number>(store, {
    start: () => metrics.now(),
    // A batch no store could take (a key with U+0000) is its caller's error, not the store's.
    end: (started, failed, error) =>
      metrics.storeWritten(started, failed && !(error instanceof InvalidStoreRequestError)),
  });
}
