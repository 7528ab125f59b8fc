/**
 * The agent platform's sessions: which executor each is routed to, its turns and their states,
 * and what a session keeps after it ended (its `executor_session_ref`, for a restarted executor
 * to resume). Requests from an executor are checked here: a session routed elsewhere is refused
 * (-32001), a turn that is not active too (-32007).
 */
import type { ExecutorHandle, Session } from "../../harness/handles.ts";
import { BoundedSet } from "../../protocol/bounded-set.ts";
import { ForbiddenError, TurnInactiveError } from "../../protocol/generated/errors.ts";
import type { PlatformContext } from "./context.ts";
import { ACTIVE, type SessionRecord, type TurnRecord } from "./records.ts";
import type { PersistedSession, PlatformStore } from "./store.ts";
import type { AgentStreams } from "./streams.ts";

/** Every session the platform knows, live or ended. */
export class PlatformSessions {
  readonly #ctx: PlatformContext;
  readonly #store: PlatformStore;
  readonly #streams: AgentStreams;
  readonly #records = new Map<string, SessionRecord>();
  /** Ended sessions, oldest first, for forgetting. */
  readonly #ended: BoundedSet<SessionRecord>;
  readonly #endListeners: ((record: SessionRecord) => void)[] = [];

  constructor(ctx: PlatformContext, store: PlatformStore, streams: AgentStreams) {
    this.#ctx = ctx;
    this.#store = store;
    this.#streams = streams;
    this.#ended = new BoundedSet(ctx.options.remember ?? 10_000);
  }

  /** A session's record. */
  get(sessionId: string): SessionRecord | undefined {
    return this.#records.get(sessionId);
  }

  /** Calls `listener` when a session ends, after its turns were marked ended. */
  onEnded(listener: (record: SessionRecord) => void): void {
    this.#endListeners.push(listener);
  }

  /**
   * The record of `sessionId` on `executor`, opening the harness session when needed. A new
   * conversation under the id of one that ended keeps the ended one's turns: a repeat of one of
   * their turn_ids is still a repeat.
   */
  open(executor: ExecutorHandle, sessionId: string): { record: SessionRecord; created: boolean } {
    const session = this.#ctx.attached.openSession(executor.id, sessionId);
    const known = this.#records.get(sessionId);
    if (known && known.session === session) return { record: known, created: false };
    const record = this.record(
      sessionId,
      executor.id,
      session,
      known?.executorId === executor.id ? known.ref : undefined,
    );
    for (const turn of known?.turns.values() ?? []) {
      record.turns.set(turn.turnId, {
        sessionId,
        turnId: turn.turnId,
        executorId: turn.executorId,
        state: ACTIVE.has(turn.state) || turn.canceling !== undefined ? "failed" : turn.state,
        epoch: turn.epoch,
      });
    }
    return { record, created: true };
  }

  /** A new record of a session (live, or read back after it ended), its end awaited. */
  record(
    id: string,
    executorId: string,
    session: Session | undefined,
    ref: string | undefined,
  ): SessionRecord {
    const record: SessionRecord = {
      id,
      executorId,
      session,
      turns: new Map(),
      current: undefined,
      ref,
      started: new BoundedSet<string>(10_000),
      finalized: new BoundedSet<string>(10_000),
      toolUses: new Map(),
      results: new BoundedSet<string>(10_000),
      closing: false,
      ended: session === undefined,
    };
    this.#records.set(id, record);
    session?.ended.then(() => this.#sessionEnded(record));
    return record;
  }

  #sessionEnded(record: SessionRecord): void {
    // A session that ended (closed, lost, stopped) takes its turns with it: no more tokens. One
    // whose cancel was not answered ended with its session too, not by the cancel.
    for (const turn of record.turns.values()) {
      if (ACTIVE.has(turn.state) || turn.canceling !== undefined) turn.state = "failed";
      turn.canceling = undefined;
    }
    record.ended = true;
    this.#store.keepSession(record);
    for (const listener of this.#endListeners) listener(record);
    const oldest = this.#ended.add(record);
    if (oldest && this.#records.get(oldest.id) === oldest) {
      this.#records.delete(oldest.id);
      this.#store.dropSession(oldest.id);
    }
    if (this.#records.get(record.id) !== record) return;
    // The record stays (its ref lets a restarted executor resume); its streams end.
    this.#streams.end(record.id);
  }

  /** The routed record of a session, or -32001. */
  routed(executor: ExecutorHandle, sessionId: string): SessionRecord {
    const record = this.#records.get(sessionId);
    if (!record || record.executorId !== executor.id || record.ended) {
      throw new ForbiddenError("the session is not routed to this executor", {
        reason: "forbidden",
      });
    }
    return record;
  }

  /** An active turn of a session routed to `executor`, or the contract's refusal. */
  activeTurn(executor: ExecutorHandle, sessionId: string, turnId: string): TurnRecord {
    const turn = this.routed(executor, sessionId).turns.get(turnId);
    if (!turn) throw new ForbiddenError("unknown turn", { reason: "forbidden" });
    if (!ACTIVE.has(turn.state)) {
      throw new TurnInactiveError("the turn is not active", { reason: "turn_inactive" });
    }
    return turn;
  }

  /** Adopts the sessions a previous run of the harness kept (see `store.ts`). */
  adopt(rows: [string, PersistedSession][]): void {
    for (const [, persisted] of rows) {
      if (this.#records.has(persisted.id)) continue;
      const live = persisted.ended ? undefined : this.#ctx.attached.executor(persisted.executorId)
        ?.sessions.get(persisted.id);
      const record = this.record(persisted.id, persisted.executorId, live, persisted.ref);
      for (const t of persisted.turns) {
        record.turns.set(t.turnId, {
          sessionId: persisted.id,
          turnId: t.turnId,
          executorId: persisted.executorId,
          // A turn of a session the harness no longer holds has ended with it.
          state: live || !ACTIVE.has(t.state) ? t.state : "failed",
          epoch: t.epoch,
        });
      }
      record.current = persisted.current !== undefined
        ? record.turns.get(persisted.current)
        : undefined;
      for (const [toolUseId, turnId] of persisted.toolUses) {
        record.toolUses.set(toolUseId, turnId);
      }
      for (const id of persisted.results) record.results.add(id);
      record.closing = persisted.closing;
      if (!live) this.#ended.add(record);
    }
  }
}
