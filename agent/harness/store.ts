/**
 * What the agent platform keeps in the harness's store, so that it survives a restart of the
 * harness: each session with its turns and their states (`a/s/<session_id>`), each interaction
 * with its answer (`a/i/<platform_id>`), written before the harness acknowledges what changed
 * them, and read back when the harness recovers.
 */
import { isPromiseLike, type MaybePromise, type StoreOp } from "../../harness/store/store.ts";
import { describeError, ProtocolError } from "../../protocol/errors.ts";
import { ErrorCode } from "../../protocol/generated/errors.ts";
import type { PlatformContext } from "./context.ts";
import type { AgentTurnState } from "./types.ts";
import type { SessionRecord, StoredInteraction } from "./records.ts";

/** A turn, as the store keeps it. */
export interface PersistedTurn {
  readonly turnId: string;
  readonly state: AgentTurnState;
  readonly epoch: number;
}

/** An agent session, as the store keeps it (`a/s/<session_id>`). */
export interface PersistedSession {
  readonly id: string;
  readonly executorId: string;
  readonly turns: readonly PersistedTurn[];
  readonly current?: string;
  readonly ref?: string;
  readonly toolUses: readonly (readonly [string, string])[];
  readonly results: readonly string[];
  readonly closing: boolean;
  readonly ended: boolean;
}

/** An interaction, as the store keeps it (`a/i/<platform_id>`). */
export type PersistedInteraction = Omit<StoredInteraction, "expiry" | "announced" | "taken">;

const SESSION_KEYS = "a/s/";
const INTERACTION_KEYS = "a/i/";

/** The platform's part of the harness's store. */
export class PlatformStore {
  readonly #ctx: PlatformContext;

  constructor(ctx: PlatformContext) {
    this.#ctx = ctx;
  }

  /** Writes a batch to the harness's store; a failure is logged (the state stays in memory). */
  write(batch: StoreOp[]): MaybePromise<void> {
    const store = this.#ctx.host?.store;
    if (!store || batch.length === 0) return;
    const failed = (error: unknown) =>
      this.#ctx.logger.warn("agent state not stored", { error: describeError(error) });
    try {
      const written = store.write(batch);
      if (isPromiseLike(written)) return Promise.resolve(written).catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  /** Writes a session and its turns. */
  keepSession(record: SessionRecord): MaybePromise<void> {
    const persisted: PersistedSession = {
      id: record.id,
      executorId: record.executorId,
      turns: [...record.turns.values()].map((t) => ({
        turnId: t.turnId,
        state: t.state,
        epoch: t.epoch,
      })),
      ...(record.current ? { current: record.current.turnId } : {}),
      ...(record.ref !== undefined ? { ref: record.ref } : {}),
      toolUses: [...record.toolUses],
      results: record.results.values(),
      closing: record.closing,
      ended: record.ended,
    };
    return this.write([{ put: SESSION_KEYS + record.id, value: persisted }]);
  }

  /**
   * Writes an interaction. With `acknowledged`, a failure is thrown as -32004 (the request is
   * not answered: the executor sends it again).
   */
  keepInteraction(stored: StoredInteraction, acknowledged = false): MaybePromise<void> {
    const store = this.#ctx.host?.store;
    if (!store) return;
    const { expiry: _expiry, announced: _announced, taken: _taken, ...rest } = stored;
    const persisted: PersistedInteraction = rest;
    const batch: StoreOp[] = [{ put: INTERACTION_KEYS + stored.id, value: persisted }];
    if (!acknowledged) return this.write(batch);
    const refused = () =>
      new ProtocolError(ErrorCode.UNAVAILABLE, "interaction store unavailable", {
        reason: "backend_unavailable",
      });
    try {
      const written = store.write(batch);
      return isPromiseLike(written)
        ? Promise.resolve(written).catch(() => Promise.reject(refused()))
        : written;
    } catch {
      throw refused();
    }
  }

  /** Forgets a session (the oldest of those ended beyond the limit). */
  dropSession(id: string): MaybePromise<void> {
    return this.write([{ delete: SESSION_KEYS + id }]);
  }

  /** Forgets an interaction (the oldest of those settled beyond the limit). */
  dropInteraction(id: string): MaybePromise<void> {
    return this.write([{ delete: INTERACTION_KEYS + id }]);
  }

  /**
   * Reads back the sessions and interactions a previous run of the harness kept and hands them
   * to `adopt`: at once when the store answers at once, else once both lists are in.
   */
  recover(
    adopt: (
      sessions: [string, PersistedSession][],
      interactions: [string, PersistedInteraction][],
    ) => void,
  ): MaybePromise<void> {
    const store = this.#ctx.host?.store;
    if (!store) return;
    const sessions = store.list<PersistedSession>(SESSION_KEYS);
    const interactions = store.list<PersistedInteraction>(INTERACTION_KEYS);
    if (!isPromiseLike(sessions) && !isPromiseLike(interactions)) {
      adopt(sessions, interactions);
      return;
    }
    return Promise.all([sessions, interactions]).then(([s, i]) => adopt(s, i));
  }
}
