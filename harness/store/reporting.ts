/**
 * A store whose failed writes are said, not only refused: each write that throws or rejects is
 * still refused to its caller (which answers -32004 `backend_unavailable`, so the executor sends
 * it again), and the logger gets the cause of the first failure as an error, then how many more
 * failed (at most one line a minute), and a line when writes succeed again. A read-only file, a
 * full disk or a lost database connection thus shows in the log the moment it starts.
 */
import type { Clock } from "../../protocol/clock.ts";
import type { Logger } from "../../protocol/logger.ts";
import { type HarnessStore, InvalidStoreRequestError, watchedStore } from "./store.ts";
import { StoreFencedError } from "./claim.ts";

/** Failures after the first are summed up at most this often. */
const SUMMARY_MS = 60_000;

/** `store` with its write failures reported to `logger`: see the module comment. */
export function reportingStore(store: HarnessStore, logger: Logger, clock: Clock): HarnessStore {
  let failing = false;
  /** Failures since writes began to fail, and since the last line that said so. */
  let total = 0;
  let unsaid = 0;
  let saidAt = 0;
  const fail = (error: unknown) => {
    // A fenced harness says so itself, once, and stops; a batch no store could take (a key with
    // U+0000) is its caller's error, refused to it: the store did not fail.
    if (error instanceof StoreFencedError || error instanceof InvalidStoreRequestError) return;
    total++;
    const now = clock.now();
    if (!failing) {
      failing = true;
      saidAt = now;
      logger.error("harness store write failed; refusing what it cannot record", {
        error: describe(error),
      });
      return;
    }
    unsaid++;
    if (now - saidAt < SUMMARY_MS) return;
    logger.error("harness store writes still failing", { failed: unsaid, error: describe(error) });
    saidAt = now;
    unsaid = 0;
  };
  const succeed = () => {
    if (!failing) return;
    logger.warn("harness store writes succeed again", { failed: total });
    failing = false;
    total = 0;
    unsaid = 0;
  };
  return watchedStore<undefined>(store, {
    start: () => undefined,
    end: (_, failed, error) => failed ? fail(error) : succeed(),
  });
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}: ${error.message}${typeof code === "string" ? ` (${code})` : ""}`;
  }
  return String(error);
}
