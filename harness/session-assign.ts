/**
 * How sessions begin, harness side: assignment (`session.assign`, held before the request since
 * `session.ready` may arrive right behind the ack), a session opened by an agent turn, and
 * readiness (`session.ready`, written to the store before its ack) and status.
 *
 * Part of the harness's sessions (sessions.ts).
 */
import { aborted, raceSignal } from "../protocol/abort.ts";
import { spanning, type Telemetry } from "../protocol/telemetry.ts";
import type {
  SessionAssignParams,
  SessionMetadata,
  SessionStatusParams,
} from "../protocol/generated/contract.ts";
import { InvalidOutgoingParamsError, requireParamsObject } from "../protocol/errors.ts";
import { SessionRefusedError } from "./errors.ts";
import type { TracedCallOptions } from "./handle-options.ts";
import type { Session } from "./handles.ts";
import type { SessionState } from "./lifecycle.ts";
import { keys } from "./records.ts";
import { request } from "./send.ts";
import type { SessionEnds } from "./session-end.ts";
import { sessionLog, type SessionLogDeps } from "./session-events.ts";
import type { SessionRecords } from "./session-records.ts";
import { type EntryServices, type ExecutorEntry, sessionEnded, SessionEntry } from "./state.ts";
import { isPromiseLike, keyTextProblem, type MaybePromise } from "./store/store.ts";
import { storeUnavailable } from "./tool-call-ledger.ts";
import { type Outgoing, outgoing, traced } from "./tracing.ts";

/** What the beginnings of sessions need from the harness. */
export interface SessionAssignmentsDeps extends SessionLogDeps {
  readonly services: EntryServices;
  readonly requestTimeoutMs: number | undefined;
  /** Opens the client span of each `session.assign`; absent without telemetry. */
  readonly telemetry?: Telemetry;
}

/** Assigns, opens and readies the harness's sessions. */
export class SessionAssignments {
  readonly #deps: SessionAssignmentsDeps;
  /** The harness's live sessions (a new one joins them). */
  readonly #live: Map<string, SessionEntry>;
  readonly #records: SessionRecords;
  readonly #ends: SessionEnds;

  constructor(
    deps: SessionAssignmentsDeps,
    live: Map<string, SessionEntry>,
    records: SessionRecords,
    ends: SessionEnds,
  ) {
    this.#deps = deps;
    this.#live = live;
    this.#records = records;
    this.#ends = ends;
  }

  async assign(
    executor: ExecutorEntry,
    params: SessionAssignParams,
    options: TracedCallOptions,
  ): Promise<Session> {
    requireParamsObject("session.assign", params);
    const problem = keyTextProblem(params.session_id);
    if (problem !== undefined) {
      // Refused before anything is held or sent: no store could record the session.
      throw new InvalidOutgoingParamsError("session.assign", [{
        path: ["session_id"],
        message: `session_id ${problem}`,
        code: "custom",
      }]);
    }
    const telemetry = this.#deps.telemetry;
    if (options.trace === undefined && !telemetry) return this.#assign(executor, params, options);
    const out = outgoing(telemetry, "session.assign", {
      "bma.session_id": params.session_id,
      "bma.executor_id": executor.id,
    }, options.trace);
    const { trace: _given, ...rest } = options;
    return await spanning(out.span, () => this.#assign(executor, params, rest, out));
  }

  async #assign(
    executor: ExecutorEntry,
    params: SessionAssignParams,
    options: TracedCallOptions,
    out?: Outgoing,
  ): Promise<Session> {
    const id = params.session_id;
    if (executor.gone || !executor.connection) {
      throw new SessionRefusedError(id, "executor_unavailable");
    }
    if (executor.draining) throw new SessionRefusedError(id, "draining");
    const assign: SessionAssignParams = traced({
      ...params,
      metadata: { source: "harness", ...params.metadata },
    }, out?.trace);
    let existing = this.#live.get(id);
    if (!existing && this.#deps.store) {
      // An ended session the store still remembers keeps its id: a new session under it would
      // show the old one's events, and its tool_call_ids would be refused as the old one's.
      let record: unknown;
      try {
        record = await this.#deps.store.get(keys.session(id));
      } catch {
        throw storeUnavailable("session");
      }
      existing = this.#live.get(id); // assigned meanwhile by a concurrent call
      if (!existing && record !== undefined) throw new SessionRefusedError(id, "session_exists");
    }
    if (existing && existing.executor !== executor) {
      throw new SessionRefusedError(id, "session_exists");
    }
    if (existing) {
      // A repeat for a session the executor holds is accepted again (retry after a reconnect,
      // or a restart of the harness), with the session's own metadata: a repeat's other
      // metadata would leave the executor holding what the harness does not.
      const repeat = { ...assign, metadata: existing.metadata };
      await request(executor, "session.assign", repeat, options, this.#deps.requestTimeoutMs);
      return existing.view;
    }
    // Held before the request: session.ready may arrive right behind the ack.
    const session = this.create(executor, id, assign.metadata ?? {}, "assigning", false);
    try {
      const span = out?.span;
      await (span
        ? this.#deps.telemetry!.within(span, () => this.#records.write(session))
        : this.#records.write(session));
    } catch (error) {
      this.#ends.end(session, "refused", "session_ended", "skip");
      throw error;
    }
    try {
      await request(executor, "session.assign", assign, options, this.#deps.requestTimeoutMs);
    } catch (error) {
      this.#ends.end(session, "refused", "session_ended", "forget");
      throw error;
    }
    if (session.state === "assigning") this.#transition(session, "assigned");
    return session.view;
  }

  /**
   * The live session `id` of `executor`, or a new one opened by an agent turn (there is no
   * `session.assign` or `session.ready` to wait for).
   */
  open(executor: ExecutorEntry, id: string): SessionEntry {
    const existing = executor.sessions?.get(id);
    if (existing && existing.state !== "ended") return existing;
    const other = this.#live.get(id);
    if (other && other.executor !== executor) throw new SessionRefusedError(id, "session_exists");
    const session = this.create(executor, id, { source: "harness" }, "ready", true);
    this.#records.safely(() => this.#records.write(session));
    return session;
  }

  /**
   * A live session of `executor`, held under it and by the harness; `reopened`: one a previous
   * run of the harness left in the store (its log is read back, its state not told again).
   */
  create(
    executor: ExecutorEntry,
    id: string,
    metadata: SessionMetadata,
    state: SessionState,
    agent: boolean,
    reopened = false,
  ): SessionEntry {
    const session = new SessionEntry(
      id,
      executor,
      metadata,
      state,
      agent,
      sessionLog(id, executor, reopened, this.#deps),
      this.#deps.services,
    );
    (executor.sessions ??= new Map()).set(id, session);
    this.#live.set(id, session);
    if (!reopened) this.#records.observeState(session);
    return session;
  }

  ready(session: SessionEntry, signal: AbortSignal | undefined): Promise<void> {
    const refused = aborted(signal, "session.ready");
    if (refused) return refused;
    if (session.state === "ready" || session.state === "stopping") return Promise.resolve();
    if (session.state === "ended") return Promise.reject(sessionEnded(session));
    let waiter!: { resolve(): void; reject(error: unknown): void };
    const ready = new Promise<void>((resolve, reject) => {
      waiter = { resolve, reject };
      (session.readyWaiters ??= []).push(waiter);
    });
    // An abandoned wait leaves the session's waiters: a caller that retries holds nothing.
    return raceSignal(ready, signal, "session.ready", () => {
      const waiters = session.readyWaiters;
      const at = waiters?.indexOf(waiter) ?? -1;
      if (at >= 0) waiters!.splice(at, 1);
    });
  }

  /** `session.ready` arrived: written before the ack; whether it was a repeat. */
  markReady(session: SessionEntry): MaybePromise<boolean> {
    if (session.state === "ready" || session.state === "stopping" || session.state === "ended") {
      return true;
    }
    session.state = "ready";
    let written: MaybePromise<void>;
    try {
      written = this.#records.write(session);
    } catch {
      // Not recorded, so not acknowledged: the executor sends session.ready again.
      session.state = "assigned";
      throw storeUnavailable("session");
    }
    const done = () => {
      for (const waiter of session.readyWaiters?.splice(0) ?? []) waiter.resolve();
      this.#records.observeState(session);
      return false;
    };
    if (!isPromiseLike(written)) return done();
    return Promise.resolve(written).then(done, () => {
      if (session.state === "ready") session.state = "assigned";
      return Promise.reject(storeUnavailable("session"));
    });
  }

  /** A `session.status` notification. */
  status(session: SessionEntry, params: SessionStatusParams): void {
    session.reported = params;
  }

  #transition(session: SessionEntry, state: SessionState): void {
    session.state = state;
    this.#records.safely(() => this.#records.write(session));
    this.#records.observeState(session);
  }
}
