/**
 * A server-sent event stream to one page, bounded: what the page has not read is held up to a
 * limit, past which the stream errors with {@linkcode StreamBacklogError} and is dropped (the
 * page's `EventSource` reconnects and picks up where it is). Used by the inspector's live state
 * and by its terminals' output.
 *
 * Portable: web-standard APIs only.
 */
import type { Logger } from "../../protocol/logger.ts";
import { StreamBacklogError } from "../../harness/errors.ts";
import type { UnsentBudget } from "../../transport/unsent-budget.ts";

/** What a stream's source writes to (see {@linkcode boundedEventStream}). */
export interface EventSink {
  /** Queues encoded event bytes (dropped once the stream has ended). */
  write(bytes: Uint8Array): void;
  /** Ends the stream (with `error`: errors it, discarding what it held). */
  end(error?: Error): void;
  /**
   * Whether the page has taken what was written, up to what the server reads ahead: a source
   * with a backlog of its own (a terminal's kept output) writes while this holds, and goes on
   * when `onRoom`'s callback is called, so that a page that reads gets all of it and one that
   * does not is held no more than the read-ahead.
   */
  hasRoom(): boolean;
  /** Sets what is called each time the page has taken what was written (see `hasRoom`). */
  onRoom(callback: () => void): void;
}

/** Options of {@linkcode boundedEventStream}. */
export interface BoundedEventStreamOptions {
  /** The request's signal: the stream ends when the page goes. */
  readonly signal: AbortSignal;
  /** Most bytes held for a page that does not read (beyond one message). */
  readonly maxQueueBytes: number;
  /** Where a dropped page is told of. */
  readonly logger: Logger;
  /** Headers of the response besides its content type. */
  readonly headers: Record<string, string>;
  /**
   * The budget of unread bytes this stream shares with the server's other streams: past it the
   * streams that hold the most are dropped as a page that stops reading is.
   */
  readonly budget?: UnsentBudget;
}

/** What the server reads into its own buffer before the stream counts as behind. */
const HIGH_WATER_BYTES = 64 * 1024;

/** The comment that keeps an idle stream open through idle timeouts (Bun.serve: 10 s). */
const PING = new TextEncoder().encode(": ping\n\n");
const PING_MS = 5_000;

/**
 * A `text/event-stream` response fed by `open`, which starts writing to the sink it is given and
 * returns what stops it (called once, however the stream ends). `end` ends it from outside.
 */
export function boundedEventStream(
  options: BoundedEventStreamOptions,
  open: (sink: EventSink) => () => void,
): { response: Response; end: () => void } {
  const { signal, maxQueueBytes, logger } = options;
  let end: (error?: Error) => void = () => {};
  let room = () => {};
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      let ended = false;
      let stop: (() => void) | undefined;
      const held = () => Math.max(0, HIGH_WATER_BYTES - (controller.desiredSize ?? 0));
      const counted = options.budget?.track({
        unsentBytes: held,
        shed: () => {
          logger.info("inspector stream dropped: the streams' unread bytes are over budget", {
            queued_bytes: held(),
          });
          end(new StreamBacklogError(maxQueueBytes));
        },
      });
      const write = (bytes: Uint8Array) => {
        if (ended) return;
        // A page that stops reading is dropped. The stream errors rather than closes: that
        // discards what it held at once (a closed stream keeps its queue for a reader that may
        // never come), and the server drops the connection. A message is always taken when
        // nothing is queued, so one larger than the bound still reaches a page that reads.
        const queued = HIGH_WATER_BYTES - (controller.desiredSize ?? 0);
        if (queued > 0 && queued + bytes.byteLength > maxQueueBytes) {
          logger.info("inspector stream dropped: its page stopped reading", {
            queued_bytes: queued,
          });
          return end(new StreamBacklogError(maxQueueBytes));
        }
        controller.enqueue(bytes);
        counted?.update(held());
      };
      const ping = setInterval(() => write(PING), PING_MS);
      const onAbort = () => end();
      end = (error) => {
        if (ended) return;
        ended = true;
        counted?.release();
        clearInterval(ping);
        signal.removeEventListener("abort", onAbort);
        stop?.();
        try {
          if (error) controller.error(error);
          else controller.close();
        } catch {
          // Already canceled.
        }
      };
      signal.addEventListener("abort", onAbort, { once: true });
      const dispose = open({
        write,
        end: (error) => end(error),
        hasRoom: () => !ended && (controller.desiredSize ?? 0) > 0,
        onRoom: (callback) => (room = callback),
      });
      if (ended) dispose();
      else stop = dispose;
      if (signal.aborted) end();
    },
    // Called when what was queued fell below the read-ahead (the page read it).
    pull() {
      room();
    },
    cancel() {
      end();
    },
  }, new ByteLengthQueuingStrategy({ highWaterMark: HIGH_WATER_BYTES }));
  return {
    response: new Response(stream, {
      status: 200,
      headers: {
        ...options.headers,
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-store",
      },
    }),
    end: () => end(),
  };
}
