/**
 * What the harness writes and tells of its sessions: each session's record in the store (its
 * executor index with it while live), the ended ones remembered until `rememberEnded` newer ones
 * have ended, and each change of state to the observers (`session.state`).
 *
 * Part of the harness's sessions (sessions.ts); the other parts write through it.
 */
import type { Clock } from "../protocol/clock.ts";
import type { Logger } from "../protocol/logger.ts";
import { then } from "./maybe.ts";
import type { Observers } from "./observe.ts";
import { keys, type SessionRecord, type StoredRegistration } from "./records.ts";
import type { SessionEntry } from "./state.ts";
import {
  type HarnessStore,
  isPromiseLike,
  type MaybePromise,
  type StoreOp,
} from "./store/store.ts";

/** What the records need from the harness. */
export interface SessionRecordsDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly observers: Observers;
  /** Ended sessions remembered in the store. */
  readonly rememberEnded: number;
}

/** The sessions' records in the store, and the observation of their states. */
export class SessionRecords {
  /** How many ended sessions the store remembers (counted at recovery). */
  endedCount = 0;
  readonly #deps: SessionRecordsDeps;

  constructor(deps: SessionRecordsDeps) {
    this.#deps = deps;
  }

  /** Writes a session's record (its executor index with it, while live). */
  write(session: SessionEntry): MaybePromise<void> {
    const store = this.#deps.store;
    if (!store) return;
    const deadline = session.endDeadline;
    const record: SessionRecord & { executor: StoredRegistration } = {
      id: session.id,
      executorId: session.executor.id,
      metadata: session.metadata,
      state: session.state,
      ...(session.agent ? { agent: true } : {}),
      ...(deadline?.at !== undefined
        ? { endBy: deadline.at, endByReason: session.endByReason }
        : {}),
      executor: session.executor.register,
    };
    return store.write([
      { put: keys.session(session.id), value: record },
      { put: keys.executorSession(session.executor.id, session.id), value: 1 },
    ]);
  }

  /** Writes an ended session's record (it is remembered). */
  /** Writes the session's end; resolves whether the store took it (true without a store). */
  recordEnd(session: SessionEntry): MaybePromise<boolean> {
    const store = this.#deps.store;
    if (!store) return true;
    const record: SessionRecord & { executor: StoredRegistration } = {
      id: session.id,
      executorId: session.executor.id,
      metadata: session.metadata,
      state: "ended",
      endReason: session.endReason!,
      endedAt: this.#deps.clock.now(),
      ...(session.agent ? { agent: true } : {}),
      executor: session.executor.register,
    };
    return this.writeEnded(record, session.endReason!);
  }

  /**
   * Writes `record` as ended with `reason` (the store must be there); resolves whether the store
   * took it (a failure is logged).
   */
  writeEnded(record: SessionRecord, reason: string): MaybePromise<boolean> {
    const store = this.#deps.store!;
    const endedAt = record.endedAt ?? this.#deps.clock.now();
    const ended: SessionRecord = { ...record, state: "ended", endReason: reason, endedAt };
    const written = this.safely(() =>
      then(
        store.write([
          { put: keys.session(ended.id), value: ended },
          { delete: keys.executorSession(ended.executorId, ended.id) },
          { put: keys.ended(endedAt, ended.id), value: 1 },
        ]),
        () => true,
      )
    );
    this.endedCount++;
    return then(written, (stored) => {
      void this.#trimEnded();
      return stored === true;
    });
  }

  /** Forgets the oldest ended sessions beyond `rememberEnded`. */
  #trimEnded(): MaybePromise<void> {
    const store = this.#deps.store!;
    const excess = this.endedCount - this.#deps.rememberEnded;
    if (excess <= 0) return;
    return then(
      this.safely(() => store.list<number>(keys.endedOrder, { limit: excess })),
      (rows) => {
        if (!rows) return;
        const batch: StoreOp[] = [];
        for (const [key] of rows) {
          const id = key.slice(key.indexOf("/", 3) + 1);
          batch.push({ delete: key }, ...this.#forgetOps(id));
        }
        this.endedCount -= rows.length;
        return then(this.safely(() => store.write(batch)), () => undefined);
      },
    );
  }

  /** Deletes what the store holds of sessions that never started. */
  forget(ids: readonly string[], executorId: string): void {
    const store = this.#deps.store;
    if (!store) return;
    const batch: StoreOp[] = [];
    for (const id of ids) {
      batch.push({ delete: keys.executorSession(executorId, id) }, ...this.#forgetOps(id));
    }
    this.safely(() => store.write(batch));
  }

  #forgetOps(id: string): StoreOp[] {
    return [
      { delete: keys.session(id) },
      { deletePrefix: keys.events(id) },
    ];
  }

  /** A store call whose failure is logged, not thrown (housekeeping, not an acknowledgement). */
  safely<T>(fn: () => MaybePromise<T>): MaybePromise<T | undefined> {
    const failed = (error: unknown) => {
      this.#deps.logger.warn("harness store write failed", { error: String(error) });
      return undefined;
    };
    try {
      const result = fn();
      return isPromiseLike(result) ? Promise.resolve(result).catch(failed) : result;
    } catch (error) {
      return failed(error);
    }
  }

  /** Tells the observers the session's state (`session.state`), with the end's reason. */
  observeState(session: SessionEntry, reason?: string): void {
    const observers = this.#deps.observers;
    if (!observers.active) return;
    observers.emit({
      type: "session.state",
      at: this.#deps.clock.now(),
      sessionId: session.id,
      executorId: session.executor.id,
      state: session.state,
      ...(reason !== undefined ? { reason } : {}),
    });
  }
}
