/**
 * The brain API's event stream (`GET /sessions/{id}/events` with `Accept: text/event-stream`):
 * a session's durable events as server-sent events, each with its position as the event id (a
 * client reconnects with `Last-Event-ID`), a ping on an idle stream, and an `end` event when the
 * session ends or the stream's lifetime does. Its own module: the stream's flow control and
 * timers are one piece, apart from the routes (brain-api.ts).
 *
 * Portable: web-standard APIs only.
 */
import type { Clock, TimerHandle } from "../../protocol/clock.ts";
import type { Logger } from "../../protocol/logger.ts";
import type { Session } from "../../harness/handles.ts";
import type { SessionEventRecord } from "../../harness/records.ts";
import { endedWithHarness } from "./views.ts";
import { serverSentEvent } from "../shared/server-sent-event.ts";
import { StreamBacklogError } from "../../harness/errors.ts";
import type { UnsentBudget, UnsentEntry } from "../../transport/unsent-budget.ts";

/** A comment on an idle event stream this often keeps proxies and idle timeouts from closing it. */
const STREAM_PING_MS = 5_000;
/**
 * What an event stream holds for its client before it stops reading the log: a client that stops
 * reading is owed at most this and one record (and the `end` event), whatever the session sends.
 */
const STREAM_HIGH_WATER_BYTES = 64 * 1024;

/** What an event stream needs besides its session. */
export interface EventStreamOptions {
  /** The request's signal: the stream stops when the client goes away. */
  readonly signal: AbortSignal;
  /** Its lifetime's and pings' timers. */
  readonly clock: Clock;
  /** Where a failed read of the log goes. */
  readonly logger: Logger;
  /** Its lifetime: it then ends with `event: end`. */
  readonly maxStreamMs: number;
  /**
   * The budget of unread bytes it shares with the API's other streams: past it the streams that
   * hold the most error (their connections are dropped, what they held discarded).
   */
  readonly budget?: UnsentBudget;
}

/**
 * The events of `session` from `from` as server-sent events, read from the log only as fast as
 * the client takes them: the next record is read while the stream holds less than
 * {@linkcode STREAM_HIGH_WATER_BYTES}, so a client that stops reading holds the session's
 * events where they are kept anyway (its log), not in a queue of its own.
 */
export function eventStream(
  session: Session,
  from: number,
  options: EventStreamOptions,
): Response {
  const { clock, logger, maxStreamMs } = options;
  const encoder = new TextEncoder();
  const requestSignal = options.signal;
  const reading = new AbortController();
  const records = session.events({ from, signal: reading.signal });
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let lifetime: TimerHandle | undefined;
  let ping: TimerHandle | undefined;
  let stopped = false;
  let next = from;
  let counted: UnsentEntry | undefined;
  const held = () => Math.max(0, STREAM_HIGH_WATER_BYTES - (controller.desiredSize ?? 0));
  const send = (text: string) => {
    controller.enqueue(encoder.encode(text));
    counted?.update(held());
  };

  /** Stops reading the log and the timers; false when it already had. */
  const stop = (): boolean => {
    if (stopped) return false;
    stopped = true;
    counted?.release();
    if (lifetime !== undefined) clock.clearTimeout(lifetime);
    if (ping !== undefined) clock.clearTimeout(ping);
    requestSignal.removeEventListener("abort", cancel);
    reading.abort();
    void records.return(undefined).catch(() => {});
    return true;
  };
  /** The client went away: nothing more is sent. */
  const cancel = () => void stop();
  /** Ends the stream with `event: end`, which tells the client where to go on from. */
  const finish = (ended: boolean) => {
    if (!stop()) return;
    send(serverSentEvent({ event: "end", data: { next, ended } }));
    controller.close();
  };
  const keepAlive = () => {
    // Only for a client that keeps up: one that is behind has no idle timeout to beat, and a
    // ping must not add to what is queued for it.
    if ((controller.desiredSize ?? 0) > 0) send(": ping\n\n");
    ping = clock.setTimeout(keepAlive, STREAM_PING_MS);
  };

  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c;
      const budget = options.budget;
      counted = budget?.track({
        unsentBytes: held,
        shed: () => {
          const bytes = held();
          if (!stop()) return;
          logger.info("brain API event stream dropped: the streams' unread bytes are over budget", {
            queued_bytes: bytes,
          });
          controller.error(new StreamBacklogError(budget.maxBytes));
        },
      });
      requestSignal.addEventListener("abort", cancel, { once: true });
      // The lifetime ends the stream even while a record waits for the client: what it holds
      // stays as it is, and a server drops a client that takes nothing (`serveInspector`'s
      // `slowClientTimeoutMs`).
      lifetime = clock.setTimeout(() => finish(false), maxStreamMs);
      ping = clock.setTimeout(keepAlive, STREAM_PING_MS);
      if (requestSignal.aborted) cancel();
    },
    async pull() {
      let record: IteratorResult<SessionEventRecord, void>;
      try {
        record = await records.next();
      } catch (error) {
        if (!stop()) return;
        logger.error("brain API event stream failed", { error: String(error) });
        send(serverSentEvent({ event: "error", data: { code: "internal_error" } }));
        controller.close();
        return;
      }
      if (stopped) return;
      // The log ends with the session (a read stopped by the lifetime has finished already).
      // One ended only because this harness closes is not over: the client reconnects.
      if (record.done) return finish(session.state === "ended" && !await endedWithHarness(session));
      const index = record.value.index;
      // Records the client has not read are no longer kept (the log's bounds): it is told.
      if (index > next + 1) {
        send(
          serverSentEvent({ event: "skipped", data: { from: next, skipped: index - next - 1 } }),
        );
      }
      next = index;
      send(serverSentEvent({ id: String(next), data: record.value }));
    },
    cancel,
  }, new ByteLengthQueuingStrategy({ highWaterMark: STREAM_HIGH_WATER_BYTES }));
  return new Response(stream, {
    status: 200,
    headers: {
      "content-type": "text/event-stream",
      "cache-control": "no-store",
      // The stream's end is its connection's: the client reconnects for the next one, and a
      // connection kept open after it would only hold what a client that is behind left unread.
      connection: "close",
    },
  });
}
