/**
 * Durable `session.event`s: every event is kept until the harness acknowledges it, and after a
 * reconnect the unacknowledged ones are resent in their original order, under their original
 * JSON-RPC ids (the harness deduplicates by id), before any event sent for the first time.
 *
 * Within a session, events are sent one at a time by default: a harness that refused one event
 * (-32004, its store was down) but accepted the next would otherwise hold them out of order, and
 * nothing on the wire would tell. Events with a `sequence` (agent events) are pipelined, up to
 * {@linkcode SEQUENCED_WINDOW} in flight: the harness rejects a gap with -32013 and
 * `expected_sequence`, so a refusal can never reorder them. One WebSocket delivers in order, so
 * what the harness accepted of a session is a prefix of what was sent; resending the
 * unacknowledged rest in order keeps the session's order. A refusal worth retrying stops the
 * session's pipeline until everything in flight has settled, then resends from the first
 * unacknowledged event.
 */
import type { Clock, TimerHandle } from "../protocol/clock.ts";
import { InvalidOutgoingParamsError, ProtocolError } from "../protocol/errors.ts";
import {
  isSessionEventParams,
  METHOD_SPECS,
  type SessionEventParams,
  type SessionEventResult,
} from "../protocol/generated/contract.ts";
import { ErrorCode } from "../protocol/generated/errors.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Peer } from "../protocol/peer.ts";
import { retryDelay, retryVerdict } from "../protocol/retry.ts";
import { type BackoffPolicy, type Deferred, deferred, describeError } from "./timing.ts";

/** Events with a `sequence` in flight per session at once. */
export const SEQUENCED_WINDOW = 64;

interface EventEntry {
  readonly id: string;
  /** Position in the client-wide enqueue order. */
  readonly order: number;
  readonly params: SessionEventParams;
  readonly done: Deferred<SessionEventResult>;
  /** The connection the entry is in flight on; undefined when not in flight. */
  sentOn: Peer | undefined;
  /** How many times it was sent. */
  sends: number;
  /** Acknowledged, or given up on: nothing more to do. */
  settled: boolean;
}

interface SessionQueue {
  readonly sessionId: string;
  entries: EventEntry[];
  head: number;
  inFlight: number;
  /** A retryable refusal paused the pipeline. */
  stalled: boolean;
  /** The pause's delay has passed; resume once nothing is in flight. */
  retryDue: boolean;
  retryTimer: TimerHandle | undefined;
  failures: number;
  idleWaiters: (() => void)[];
}

/** Options of {@linkcode EventOutbox}. */
export interface EventOutboxOptions {
  clock: Clock;
  logger: Logger;
  /** Prefix of the JSON-RPC ids; unique per client instance so ids never repeat across runs. */
  idPrefix: string;
  /** Events without a `sequence` in flight per session at once (1 keeps order under refusals). */
  window: number;
  /** Per-send timeout in ms. */
  requestTimeoutMs: number;
  /** Delay between retries after a refusal. */
  retry: BackoffPolicy;
  random: () => number;
}

/** The durable session-event queue of one client. */
export class EventOutbox {
  readonly #options: EventOutboxOptions;
  readonly #queues = new Map<string, SessionQueue>();
  #peer: Peer | undefined;
  #nextOrder = 1;
  #closedWith: unknown;

  constructor(options: EventOutboxOptions) {
    this.#options = options;
  }

  /** Events not yet acknowledged (or given up on). */
  get pending(): number {
    let n = 0;
    for (const queue of this.#queues.values()) n += queue.entries.length - queue.head;
    return n;
  }

  /**
   * Queues one event; resolves with the harness's acknowledgement. Rejects only when the
   * harness refuses the event for good (e.g. -32002 unknown session, -32602) or the client
   * stops first.
   */
  enqueue(params: SessionEventParams): Promise<SessionEventResult> {
    if (this.#closedWith !== undefined) return Promise.reject(this.#closedWith);
    const checked = isSessionEventParams(params)
      ? undefined
      : METHOD_SPECS.get("session.event")!.params.safeParse(params);
    if (checked && !checked.success) {
      return Promise.reject(
        new InvalidOutgoingParamsError(
          "session.event",
          checked.error.issues.map((i) => ({
            path: i.path.map(String),
            message: i.message,
            code: i.code,
          })),
        ),
      );
    }
    const order = this.#nextOrder++;
    const entry: EventEntry = {
      id: `${this.#options.idPrefix}${order}`,
      order,
      params,
      done: deferred<SessionEventResult>(),
      sentOn: undefined,
      sends: 0,
      settled: false,
    };
    const queue = this.#queue(params.session_id);
    queue.entries.push(entry);
    this.#pump(queue);
    return entry.done.promise;
  }

  /** Starts sending on a freshly registered connection: every unacknowledged event first. */
  attach(peer: Peer): void {
    this.#peer = peer;
    let resent = 0;
    const heads: [number, SessionQueue][] = [];
    for (const queue of this.#queues.values()) {
      queue.inFlight = 0;
      queue.stalled = false;
      queue.retryDue = false;
      if (queue.retryTimer !== undefined) this.#options.clock.clearTimeout(queue.retryTimer);
      queue.retryTimer = undefined;
      let head: number | undefined;
      for (let i = queue.head; i < queue.entries.length; i++) {
        const entry = queue.entries[i];
        entry.sentOn = undefined;
        if (entry.settled) continue;
        head ??= entry.order;
        if (entry.sends > 0) resent++;
      }
      if (head !== undefined) heads.push([head, queue]);
    }
    if (resent) {
      this.#options.logger.debug("resending unacknowledged session events", { count: resent });
    }
    // Each session resumes from its first unacknowledged event, under the usual window; the
    // sessions whose waiting events are oldest go first. New events queue behind old ones.
    heads.sort((a, b) => a[0] - b[0]);
    for (const [, queue] of heads) this.#pump(queue);
  }

  /** Stops sending on a connection that ended; its unacknowledged events wait for the next. */
  detach(peer: Peer): void {
    if (this.#peer === peer) this.#peer = undefined;
  }

  /** Resolves once every event of `sessionId` queued so far is settled. */
  idle(sessionId: string): Promise<void> {
    const queue = this.#queues.get(sessionId);
    if (!queue || queue.head >= queue.entries.length) return Promise.resolve();
    return new Promise((resolve) => queue.idleWaiters.push(resolve));
  }

  /** Rejects every pending event with `error` (the client stopped); later enqueues reject too. */
  close(error: unknown): void {
    this.#closedWith = error;
    this.#peer = undefined;
    for (const queue of this.#queues.values()) {
      if (queue.retryTimer !== undefined) this.#options.clock.clearTimeout(queue.retryTimer);
      for (let i = queue.head; i < queue.entries.length; i++) {
        const entry = queue.entries[i];
        if (!entry.settled) {
          entry.settled = true;
          entry.done.reject(error);
        }
      }
      queue.head = queue.entries.length;
      this.#compact(queue);
    }
  }

  #queue(sessionId: string): SessionQueue {
    let queue = this.#queues.get(sessionId);
    if (!queue) {
      queue = {
        sessionId,
        entries: [],
        head: 0,
        inFlight: 0,
        stalled: false,
        retryDue: false,
        retryTimer: undefined,
        failures: 0,
        idleWaiters: [],
      };
      this.#queues.set(sessionId, queue);
    }
    return queue;
  }

  #pump(queue: SessionQueue): void {
    const peer = this.#peer;
    if (!peer || queue.stalled) return;
    for (let i = queue.head; i < queue.entries.length; i++) {
      const entry = queue.entries[i];
      if (entry.settled || entry.sentOn === peer) continue;
      const window = entry.params.sequence === undefined ? this.#options.window : SEQUENCED_WINDOW;
      if (queue.inFlight >= window) return;
      this.#send(entry, queue, peer);
    }
  }

  #send(entry: EventEntry, queue: SessionQueue, peer: Peer): void {
    entry.sentOn = peer;
    entry.sends++;
    queue.inFlight++;
    peer.call("session.event", entry.params, {
      id: entry.id,
      timeoutMs: this.#options.requestTimeoutMs,
    }).then(
      (result) => this.#settle(entry, queue, peer, result, undefined),
      (error) => this.#settle(entry, queue, peer, undefined, error),
    );
  }

  #settle(
    entry: EventEntry,
    queue: SessionQueue,
    peer: Peer,
    result: SessionEventResult | undefined,
    error: unknown,
  ): void {
    const current = entry.sentOn === peer;
    if (current) {
      entry.sentOn = undefined;
      queue.inFlight--;
    }
    if (result !== undefined) {
      // An acknowledgement counts from any connection: the harness has the event.
      queue.failures = 0;
      this.#finish(entry, () => entry.done.resolve(result));
    } else if (current && !entry.settled) {
      this.#failed(entry, queue, error);
    }
    if (queue.retryDue && queue.inFlight === 0) {
      queue.retryDue = false;
      queue.stalled = false;
    }
    this.#advance(queue);
    this.#pump(queue);
  }

  #failed(entry: EventEntry, queue: SessionQueue, error: unknown): void {
    // The shared rule (protocol/retry.ts) decides; what differs here is only how a retry is
    // paced: many events are in flight at once, so a refusal pauses the session's pipeline
    // instead of one request's loop.
    const verdict = retryVerdict(error);
    // A lost connection: the next one resends everything unacknowledged (attach).
    if (verdict === "again" || this.#peer === undefined) return;
    if (error instanceof ProtocolError && error.code === ErrorCode.CONFLICT) {
      const expected = (error.data as { expected_sequence?: unknown } | undefined)
        ?.expected_sequence;
      if (typeof expected === "number") {
        // Everything of the session below the expected sequence is already accepted.
        for (let i = queue.head; i < queue.entries.length; i++) {
          const e = queue.entries[i];
          const seq = e.params.sequence;
          if (!e.settled && e.sentOn === undefined && typeof seq === "number" && seq < expected) {
            this.#finish(
              e,
              () => e.done.resolve({ acked_sequence: expected - 1, duplicate: true }),
            );
          }
        }
        if (!this.#holds(queue, expected)) {
          // The expected event was refused for good earlier: no resend can fill the gap, and
          // resending the rest would be refused again without end.
          this.#options.logger.warn("session events refused: a gap no resend can fill", {
            session_id: entry.params.session_id,
            expected_sequence: expected,
          });
          for (let i = queue.head; i < queue.entries.length; i++) {
            const e = queue.entries[i];
            if (!e.settled && e.params.sequence !== undefined) {
              this.#finish(e, () => e.done.reject(error));
            }
          }
          return;
        }
        this.#stall(queue);
        return;
      }
    }
    if (verdict === "retry") {
      this.#stall(queue, error);
      return;
    }
    this.#options.logger.warn("session event refused: dropped", {
      session_id: entry.params.session_id,
      error: describeError(error),
    });
    this.#finish(entry, () => entry.done.reject(error));
  }

  /** Whether an event of `queue` waiting for its acknowledgement has `sequence`. */
  #holds(queue: SessionQueue, sequence: number): boolean {
    for (let i = queue.head; i < queue.entries.length; i++) {
      const e = queue.entries[i];
      if (!e.settled && e.params.sequence === sequence) return true;
    }
    return false;
  }

  /**
   * Pauses the session's pipeline; it resumes from its first unacknowledged event after the
   * shared retry delay of `cause` (its `retry_after_ms`, else the backoff), or at once without
   * one (a sequence gap: the harness said where to resume).
   */
  #stall(queue: SessionQueue, cause?: unknown): void {
    if (queue.stalled) return;
    queue.stalled = true;
    queue.failures++;
    const delay = cause === undefined
      ? 0
      : retryDelay(cause, this.#options.retry, queue.failures, this.#options.random);
    queue.retryTimer = this.#options.clock.setTimeout(() => {
      queue.retryTimer = undefined;
      if (queue.inFlight === 0) queue.stalled = false;
      else queue.retryDue = true;
      this.#pump(queue);
    }, delay);
  }

  #finish(entry: EventEntry, settle: () => void): void {
    if (entry.settled) return;
    entry.settled = true;
    settle();
  }

  /** Drops settled entries from the head and wakes idle waiters. */
  #advance(queue: SessionQueue): void {
    while (queue.head < queue.entries.length && queue.entries[queue.head].settled) queue.head++;
    this.#compact(queue);
  }

  #compact(queue: SessionQueue): void {
    if (queue.head >= queue.entries.length) {
      queue.entries = [];
      queue.head = 0;
      for (const wake of queue.idleWaiters.splice(0)) wake();
      if (!queue.stalled && queue.inFlight === 0) this.#queues.delete(queue.sessionId);
    } else if (queue.head > 1024 && queue.head * 2 > queue.entries.length) {
      queue.entries = queue.entries.slice(queue.head);
      queue.head = 0;
    }
  }
}
