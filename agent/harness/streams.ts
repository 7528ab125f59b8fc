/**
 * The agent platform's session streams ({@linkcode AgentPlatform.stream}): each subscriber's
 * queue of previews (lossy: a subscriber that lags loses deltas) and durable events (each
 * once, in sequence order), ended with the session.
 */
import { AsyncQueue } from "../queue.ts";
import type { AgentPlatformOptions, AgentStreamEvent, StreamOptions } from "./types.ts";

/** The subscribers of every session's stream. */
export class AgentStreams {
  readonly #streams = new Map<string, Set<AsyncQueue<AgentStreamEvent>>>();
  readonly #options: AgentPlatformOptions;

  constructor(options: AgentPlatformOptions) {
    this.#options = options;
  }

  /**
   * Subscribes to a session's agent stream from now on: `event_start` and `event_delta` for
   * previews (lossy), and each durable event once, in sequence order (`event`). Ends when the
   * session ends, `signal` aborts, or the reader stops early.
   */
  stream(sessionId: string, options: StreamOptions = {}): AsyncIterableIterator<AgentStreamEvent> {
    const queue = new AsyncQueue<AgentStreamEvent>();
    let set = this.#streams.get(sessionId);
    if (!set) this.#streams.set(sessionId, set = new Set());
    set.add(queue);
    const signal = options.signal;
    const remove = () => {
      queue.end();
      signal?.removeEventListener("abort", remove);
      const current = this.#streams.get(sessionId);
      current?.delete(queue);
      if (current?.size === 0) this.#streams.delete(sessionId);
    };
    if (signal?.aborted) remove();
    else signal?.addEventListener("abort", remove, { once: true });
    const iterator: AsyncIterableIterator<AgentStreamEvent> = {
      next: () => queue.next(),
      return: () => {
        remove();
        return queue.return();
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  /** Hands an item to every subscriber of the session; a lossy one skips those that lag. */
  publish(sessionId: string, item: AgentStreamEvent, lossy: boolean): void {
    const queues = this.#streams.get(sessionId);
    if (!queues) return;
    const limit = this.#options.maxBufferedDeltas ?? 1_000;
    for (const queue of queues) {
      if (lossy && queue.size >= limit) continue;
      queue.push(item);
    }
  }

  /** The session ended: its subscribers' streams end. */
  end(sessionId: string): void {
    const streams = this.#streams.get(sessionId);
    this.#streams.delete(sessionId);
    for (const queue of streams ?? []) queue.end();
  }
}
