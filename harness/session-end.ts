/**
 * How sessions end, harness side: `session.stop` and the wait for `session.ended` after a stop
 * or a close (bounded: an executor that never reports it does not hold the caller), the end by
 * `session.ended`, and the end of sessions a reconnect did not resume (`lost`). An end fails the
 * session's pending tool calls, ends its channels and terminals and finishes its readers.
 *
 * Part of the harness's sessions (sessions.ts).
 */
import { refuseOptions, wireSpellings } from "./option-spelling.ts";
import { raceSignal, throwIfAborted } from "../protocol/abort.ts";
import type { Ack } from "../protocol/generated/contract.ts";
import { UnavailableError } from "../protocol/generated/errors.ts";
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import type { ToolOutcomeUnknownReason } from "./errors.ts";
import type { SessionStopOptions } from "./handle-options.ts";
import type { SessionState } from "./lifecycle.ts";
import { CallbackDeadline, type Scheduler } from "./scheduler.ts";
import { repeatedAcrossReconnects, request } from "./send.ts";
import type { SessionRecords } from "./session-records.ts";
import { type ExecutorEntry, hasEnded, sessionEnded, type SessionEntry } from "./state.ts";
import { isPromiseLike, type MaybePromise } from "./store/store.ts";
import type { ToolCalls } from "./tool-calls.ts";

/** `session.stop`'s options in the wire's spelling. */
const STOP_OPTIONS = wireSpellings("grace_ms", "timeout_ms");

/** Waiting for `session.ended` beyond the executor's grace period, by default. */
const STOP_SLACK_MS = 60_000;
const DEFAULT_GRACE_MS = 5_000;

/** What becomes of an ended session's records. */
export type EndRecord =
  /** Written: ended, remembered (its events and results stay readable). */
  | "record"
  /** Nothing written (the harness closes: the next one on the store takes the session up). */
  | "skip"
  /** Deleted: it never started (the executor refused it). */
  | "forget";

/** What the ends of sessions need from the harness. */
export interface SessionEndsDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly scheduler: Scheduler;
  readonly calls: ToolCalls;
  readonly requestTimeoutMs: number | undefined;
}

/** A session the executor ended whose end the store has not taken yet. */
interface UnstoredEnd {
  readonly session: SessionEntry;
  /** The write in flight; undefined once it failed (a resent `session.ended` writes again). */
  written: Promise<boolean> | undefined;
}

const ENDED: Ack = { ok: true };
const ENDED_BEFORE: Ack = { ok: true, duplicate: true };

/** Stops and ends the harness's sessions. */
export class SessionEnds {
  readonly #deps: SessionEndsDeps;
  /**
   * Ends reported by `session.ended` whose write is pending or failed, by session id: acknowledged
   * only once stored (the executor then forgets the session), so a repeat waits for the write,
   * and a repeat after a failed one writes again. Removed once written.
   */
  readonly #unstored = new Map<string, UnstoredEnd>();
  /** The harness's live sessions (an ended one leaves them). */
  readonly #live: Map<string, SessionEntry>;
  readonly #records: SessionRecords;

  constructor(deps: SessionEndsDeps, live: Map<string, SessionEntry>, records: SessionRecords) {
    this.#deps = deps;
    this.#live = live;
    this.#records = records;
  }

  /**
   * `session.ended` from the executor, acknowledged once the store holds the end: acknowledged
   * before, a harness that stopped (or was fenced) before its write would leave the session live
   * in the store, and the next holder would end it as `lost`, its reason gone. A store that fails
   * is -32004 (the executor sends it again).
   */
  executorEnded(
    executor: ExecutorEntry,
    sessionId: string,
    reason: string | undefined,
  ): MaybePromise<Ack> {
    const unstored = this.#unstored.get(sessionId);
    if (unstored && unstored.session.executor === executor) {
      if (unstored.written) {
        return unstored.written.then((stored) => this.#stored(unstored, stored, ENDED_BEFORE));
      }
      return this.#acknowledged(unstored, this.#records.recordEnd(unstored.session));
    }
    const session = executor.sessions?.get(sessionId);
    // A repeat, or a session the harness no longer knows, ends the executor's retry loop.
    if (!session || session.state === "ended") return ENDED_BEFORE;
    const written = this.end(session, reason ?? "ended", "session_ended");
    if (written === true) return ENDED;
    const entry: UnstoredEnd = { session, written: undefined };
    this.#unstored.set(sessionId, entry);
    return this.#acknowledged(entry, written);
  }

  /** The acknowledgement of an end once its write settles. */
  #acknowledged(entry: UnstoredEnd, written: MaybePromise<boolean>): MaybePromise<Ack> {
    if (!isPromiseLike(written)) return this.#stored(entry, written, ENDED);
    const pending = entry.written = Promise.resolve(written);
    return pending.then((stored) => this.#stored(entry, stored, ENDED));
  }

  #stored(entry: UnstoredEnd, stored: boolean, ack: Ack): Ack {
    const id = entry.session.id;
    if (stored) {
      if (this.#unstored.get(id) === entry) this.#unstored.delete(id);
      return ack;
    }
    entry.written = undefined;
    throw new UnavailableError("the session's end could not be stored", {
      reason: "backend_unavailable",
    });
  }

  /**
   * Stops the session (`session.stop`) and waits for `session.ended` (at most the timeout:
   * then the harness ends it, `stop_timeout`).
   */
  async stop(
    session: SessionEntry,
    reason: string | undefined,
    options: SessionStopOptions,
  ): Promise<{ reason: string }> {
    throwIfAborted(options.signal, "session.stop");
    refuseOptions("session.stop", options, STOP_OPTIONS);
    if (session.state === "ended") return { reason: session.endReason! };
    const params = {
      session_id: session.id,
      ...(reason !== undefined ? { reason } : {}),
      ...(options.graceMs !== undefined ? { grace_ms: options.graceMs } : {}),
    };
    let result: { stopping: boolean };
    session.stopsSent++;
    try {
      // Sent again once an executor away within its lease is back, as tool calls wait.
      result = await repeatedAcrossReconnects(
        session.executor,
        () =>
          request(
            session.executor,
            "session.stop",
            params,
            { signal: options.signal },
            this.#deps.requestTimeoutMs,
          ),
        options.signal,
      );
    } catch (error) {
      // Ended meanwhile (its `session.ended` came before the connection went, its executor is
      // gone, its lease expired): the stop's answer is that end.
      if (hasEnded(session)) return await session.ended;
      // This stop failed (refused, timed out, aborted): unless another is on its way, or the
      // executor took one, the session takes work again.
      throw error;
    } finally {
      session.stopsSent--;
    }
    if (!result.stopping) {
      // The executor no longer holds it: there is no session.ended to wait for.
      this.end(session, reason ?? "stopped", "session_ended");
      return { reason: session.endReason! };
    }
    // session.ended may have arrived while the stop request was in flight.
    if (hasEnded(session)) return await session.ended;
    const waitMs = options.timeoutMs ?? (options.graceMs ?? DEFAULT_GRACE_MS) + STOP_SLACK_MS;
    this.awaitEnd(session, waitMs, "stop_timeout", "stopping");
    return await raceSignal(session.ended, options.signal, "session.stop");
  }

  /**
   * Waits for `session.ended` after a stop or a close: every wait ends, an executor that never
   * reports it does not hold the caller. Written with the session, so the wait survives a
   * restart of the harness.
   */
  awaitEnd(
    session: SessionEntry,
    waitMs: number,
    reason: string,
    state: SessionState = session.state,
  ): void {
    if (session.state === "ended") return;
    this.armEnd(session, this.#deps.clock.now() + waitMs, reason);
    if (state !== session.state) {
      session.state = state;
      this.#records.observeState(session);
    }
    this.#records.safely(() => this.#records.write(session));
  }

  /** Ends the session with `reason` at `at` unless `session.ended` comes first. */
  armEnd(session: SessionEntry, at: number, reason: string): void {
    const deadline = session.endDeadline ??= new CallbackDeadline(() => {
      this.#deps.logger.warn("session.ended did not arrive: ending the session", {
        session_id: session.id,
      });
      this.end(session, session.endByReason ?? reason, "session_ended");
    });
    session.endByReason = reason;
    this.#deps.scheduler.set(deadline, at);
  }

  /**
   * Ends a session: its pending tool calls fail with `ToolOutcomeUnknownError(toolReason)`, its
   * channels and terminals end, readers of its events finish. `record` says what the store
   * keeps (see {@linkcode EndRecord}).
   */
  end(
    session: SessionEntry,
    reason: string,
    toolReason: ToolOutcomeUnknownReason,
    record: EndRecord = "record",
  ): MaybePromise<boolean> {
    if (session.state === "ended") return true;
    session.state = "ended";
    session.endReason = reason;
    session.log.close();
    if (session.endDeadline) this.#deps.scheduler.clear(session.endDeadline);
    this.#deps.calls.failPending({ sessionId: session.id }, toolReason, record !== "skip");
    for (const channel of [...session.channels?.values() ?? []]) channel.end(reason);
    session.channels = undefined;
    for (const { output } of session.terminals?.values() ?? []) output.end();
    session.terminals = undefined;
    for (const waiter of session.readyWaiters?.splice(0) ?? []) {
      waiter.reject(sessionEnded(session));
    }
    const executor = session.executor;
    if (executor.sessions?.get(session.id) === session) executor.sessions.delete(session.id);
    if (this.#live.get(session.id) === session) this.#live.delete(session.id);
    let written: MaybePromise<boolean> = true;
    if (record === "record") written = this.#records.recordEnd(session);
    else if (record === "forget") this.#records.forget([session.id], executor.id);
    this.#records.observeState(session, reason);
    session.settleEnded(reason);
    return written;
  }

  /** A reconnect did not resume these sessions of `executor`: they end (`lost`). */
  lost(executor: ExecutorEntry, keep: ReadonlySet<string>): string[] {
    const resumed: string[] = [];
    for (const session of [...executor.sessions?.values() ?? []]) {
      if (keep.has(session.id)) resumed.push(session.id);
      else this.end(session, "lost", "session_lost");
    }
    return resumed;
  }
}
