/**
 * Sessions read back from the store: at start, the live sessions a previous run of the harness
 * left there go back under their executors (with a pending wait for `session.ended`, if they had
 * one; sessions of executors it no longer holds end, `lost`), and by id, a session that ended and
 * is still remembered (its events stay readable).
 *
 * Part of the harness's sessions (sessions.ts).
 */
import type { Logger } from "../protocol/logger.ts";
import { EventLog } from "./event-log.ts";
import type { Session } from "./handles.ts";
import { then } from "./maybe.ts";
import { keys, type SessionRecord, type StoredRegistration } from "./records.ts";
import type { SessionAssignments } from "./session-assign.ts";
import type { SessionEnds } from "./session-end.ts";
import type { SessionRecords } from "./session-records.ts";
import { type EntryServices, ExecutorEntry, SessionEntry } from "./state.ts";
import type { HarnessStore, MaybePromise } from "./store/store.ts";

/** What reading sessions back needs from the harness. */
export interface SessionRecoveryDeps {
  readonly logger: Logger;
  readonly store: HarnessStore | undefined;
  readonly services: EntryServices;
}

/** The parts of the harness's sessions a recovery puts sessions back through. */
export interface SessionRecoveryParts {
  /** The harness's live sessions. */
  readonly live: ReadonlyMap<string, SessionEntry>;
  readonly records: SessionRecords;
  readonly assignments: SessionAssignments;
  readonly ends: SessionEnds;
}

/** Reads the harness's sessions back from the store. */
export class SessionRecovery {
  readonly #deps: SessionRecoveryDeps;
  readonly #parts: SessionRecoveryParts;

  constructor(deps: SessionRecoveryDeps, parts: SessionRecoveryParts) {
    this.#deps = deps;
    this.#parts = parts;
  }

  /**
   * Reads the live sessions a previous run of the harness left in the store back under their
   * executors (sessions of executors it no longer holds end), and counts the ended ones.
   */
  recover(executors: ReadonlyMap<string, ExecutorEntry>): MaybePromise<void> {
    const store = this.#deps.store;
    if (!store) return;
    const { records, assignments, ends } = this.#parts;
    return then(
      store.list<SessionRecord>(keys.sessions),
      (rows) =>
        then(store.list<number>(keys.endedOrder), (ended) => {
          records.endedCount = ended.length;
          const orphans: string[] = [];
          for (const [, record] of rows) {
            if (record.state === "ended") continue;
            const executor = executors.get(record.executorId);
            if (!executor) {
              orphans.push(record.id);
              continue;
            }
            const session = assignments.create(
              executor,
              record.id,
              record.metadata,
              record.state,
              record.agent === true,
              true,
            );
            if (record.endBy !== undefined) {
              ends.armEnd(session, record.endBy, record.endByReason ?? "stop_timeout");
            }
          }
          if (orphans.length > 0) {
            this.#deps.logger.info("sessions of executors no longer held ended", {
              sessions: orphans.length,
            });
            for (const id of orphans) {
              const record = rows.find(([, r]) => r.id === id)![1];
              records.writeEnded(record, "lost");
            }
          }
        }),
    );
  }

  /**
   * A session by id: a live one, else one that ended and is still remembered in the store (its
   * events stay readable), read back as an ended session.
   */
  find(
    id: string,
    executors: ReadonlyMap<string, ExecutorEntry>,
  ): MaybePromise<Session | undefined> {
    const live = this.#parts.live.get(id);
    if (live || !this.#deps.store) return live?.view;
    return then(
      this.#deps.store.get<SessionRecord & { executor?: StoredRegistration }>(keys.session(id)),
      (record) => {
        if (!record) return undefined;
        const raced = this.#parts.live.get(id);
        if (raced) return raced.view;
        const executor = executors.get(record.executorId) ??
          this.#goneExecutor(record.executorId, record.executor);
        const log = EventLog.reopened(id, { store: this.#deps.store! });
        const session = new SessionEntry(
          id,
          executor,
          record.metadata,
          "ended",
          record.agent === true,
          log,
          this.#deps.services,
        );
        session.endReason = record.endReason ?? "ended";
        session.log.close();
        session.settleEnded(session.endReason);
        // Its events read back before it is answered: a reader that waits for none (a brain's
        // page without wait_ms) would find the log empty and ended while a store read runs.
        return then(log.load(), () => session.view);
      },
    );
  }

  /** An entry standing for an executor the harness no longer holds (an ended session's). */
  #goneExecutor(id: string, register: StoredRegistration | undefined): ExecutorEntry {
    const entry = new ExecutorEntry({
      id,
      principal: {},
      register: register ?? {
        protocol: "bma.executor.v1.1",
        executor: { name: "", os: "", arch: "", version: "" },
        environment_id: "",
      },
      capabilities: {},
      epoch: 0,
      draining: false,
    }, this.#deps.services);
    entry.gone = "closed";
    return entry;
  }
}
