/**
 * The executor's reaper process as `reaper.node.ts` holds it, whichever way the runtime starts it
 * (`node:child_process`, or `reaper-process.bun.ts` on Bun).
 */

/** What becomes of a reaper process. */
export interface ReaperEvents {
  /** It exited. */
  exit(): void;
  /** It could not be started (reported after the start returned). */
  error(error: unknown): void;
}

/** A running reaper process. */
export interface ReaperProcess {
  /**
   * Writes `text` to its stdin, into the pipe before this returns: the executor may be killed
   * the moment after it registered a session, and the reaper must know of it.
   */
  write(text: string): void;
}
