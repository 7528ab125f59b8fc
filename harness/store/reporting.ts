/**
 * A store whose failed writes are said, not only refused: each write that throws or rejects is
 * still refused to its caller (which answers -32004 `backend_unavailable`, so the executor sends
 * it again), and the logger gets the cause of the first failure as an error, then how many more
 * failed (at most one line a minute), and a line when writes succeed again. A read-only file, a
 * full disk or a lost database connection thus shows in the log the moment it starts.
 */
import type { Clock } from "../../protocol/clock.ts";
import type { Logger } from "../../protocol/logger.ts";
import {
  type HarnessStore,
  InvalidStoreRequestError,
  StoreUnavailableError,
  watchedStore,
} from "./store.ts";
import { LocalError } from "../../protocol/errors.ts";
import { StoreFencedError } from "./claim.ts";

/** Failures after the first are summed up at most this often. */
const SUMMARY_MS = 60_000;

/**
 * What the harness's store writes came to: whether the last one failed (what `/readyz` tells,
 * as `store_failing`), and the log lines that say so. Told by {@linkcode reportingStore} of each
 * batch, and by the claim's renewal of its own writes (an idle harness writes nothing else).
 */
export class StoreWriteReport {
  readonly #logger: Logger;
  readonly #clock: Clock;
  #failing = false;
  /** Failures since writes began to fail, and since the last line that said so. */
  #total = 0;
  #unsaid = 0;
  #saidAt = 0;

  constructor(logger: Logger, clock: Clock) {
    this.#logger = logger;
    this.#clock = clock;
  }

  /** Whether the last write failed. */
  get failing(): boolean {
    return this.#failing;
  }

  /** A write failed with `error`. */
  failed(error: unknown): void {
    // A fenced harness says so itself, once, and stops; a batch no store could take (a key with
    // U+0000) is its caller's error, refused to it: the store did not fail.
    if (error instanceof StoreFencedError || error instanceof InvalidStoreRequestError) return;
    this.#total++;
    const now = this.#clock.now();
    if (!this.#failing) {
      this.#failing = true;
      this.#saidAt = now;
      this.#logger.error("harness store write failed; refusing what it cannot record", {
        error: describe(error),
      });
      return;
    }
    this.#unsaid++;
    if (now - this.#saidAt < SUMMARY_MS) return;
    this.#logger.error("harness store writes still failing", {
      failed: this.#unsaid,
      error: describe(error),
    });
    this.#saidAt = now;
    this.#unsaid = 0;
  }

  /** A write succeeded. */
  succeeded(): void {
    if (!this.#failing) return;
    this.#logger.warn("harness store writes succeed again", { failed: this.#total });
    this.#failing = false;
    this.#total = 0;
    this.#unsaid = 0;
  }
}

/** `store` with the outcome of its writes told to `report`: see the module comment. */
export function reportingStore(store: HarnessStore, report: StoreWriteReport): HarnessStore {
  return watchedStore<undefined>(store, {
    start: () => undefined,
    end: (_, failed, error) => failed ? report.failed(error) : report.succeeded(),
    // A driver's failure reaches callers as one typed refusal (a brain API answers it 503); the
    // store's own refusals (a fenced store, a condition, a bad key) stay what they are.
    refusal: (error) =>
      error instanceof LocalError ? error : new StoreUnavailableError({ cause: error }),
  });
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}: ${error.message}${typeof code === "string" ? ` (${code})` : ""}`;
  }
  return String(error);
}
