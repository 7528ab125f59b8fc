/**
 * The sessions an executor holds, and how one ends: its tool calls are aborted, its cleanup
 * hooks run (the machine registers one that sends SIGTERM to every process of the session, then
 * SIGKILL to every survivor when the grace period is over, and resolves once none is left), its
 * durable events and tool results are delivered, and then `session.ended` is sent until the
 * harness accepts it: after every process of the session is gone (seed 000).
 */
import type { Clock } from "../protocol/clock.ts";
import type { SessionAssignParams, SessionMetadata } from "../protocol/generated/contract.ts";
import type { Logger } from "../protocol/logger.ts";
import type { Disposable } from "../protocol/peer.ts";
import { type ConnectionLink, deliver, type DeliveryOptions } from "../protocol/retry.ts";
import { type Deferred, deferred, describeError, sleep } from "./timing.ts";

/** Where a session is in its life. */
export type SessionState = "assigned" | "ready" | "stopping" | "ended";

/** What a cleanup hook is told. */
export interface SessionCleanup {
  /** The session ending. */
  readonly sessionId: string;
  /** Why it ends (`stopped`, `one_shot_done`, `not_resumed`, `client_stopped`, ...). */
  readonly reason: string;
  /** The time between SIGTERM and SIGKILL, in ms. */
  readonly graceMs: number;
  /** Aborted when the grace period is over: kill whatever is still running. */
  readonly graceSignal: AbortSignal;
}

/** Releases what a session holds (processes, MCP servers, mounts). May be async. */
export type SessionCleanupHook = (cleanup: SessionCleanup) => void | Promise<void>;

interface SessionInternals {
  state: SessionState;
  readonly controller: AbortController;
  readonly hooks: Set<SessionCleanupHook>;
  /** Resolves once the `session.assign` answer is on the wire. */
  readonly accepted: Deferred<void>;
  ending: Promise<void> | undefined;
}

const internals = new WeakMap<ExecutorSession, SessionInternals>();

/** A session assigned to this executor. */
export class ExecutorSession {
  /** The session id. */
  readonly id: string;
  /** The session's metadata from `session.assign`. */
  readonly metadata: SessionMetadata;
  /** The tools the harness will call in the session, when it said. */
  readonly tools: readonly string[] | undefined;
  /** The session's environment, when the harness said. */
  readonly environmentId: string | undefined;
  /** One-shot (`metadata.source` is not `"harness"`): the session ends after its tool call. */
  readonly oneShot: boolean;

  /** A session as `session.assign` describes it (the client makes them; handlers receive them). */
  constructor(params: SessionAssignParams) {
    this.id = params.session_id;
    this.metadata = params.metadata ?? {};
    this.tools = params.tools;
    this.environmentId = params.environment_id;
    this.oneShot = this.metadata.source !== "harness";
    internals.set(this, {
      state: "assigned",
      controller: new AbortController(),
      hooks: new Set(),
      accepted: deferred<void>(),
      ending: undefined,
    });
  }

  /** Where the session is in its life. */
  get state(): SessionState {
    return internals.get(this)!.state;
  }

  /** Aborted when the session begins to end (stop, one-shot done, client stop). */
  get signal(): AbortSignal {
    return internals.get(this)!.controller.signal;
  }

  /**
   * Registers a hook that runs when the session ends, before `session.ended` is sent. Hooks run
   * concurrently; each gets the grace period and a signal that fires when it is over.
   * `session.ended` waits for every hook to finish (a hook that holds processes resolves once
   * they are gone); a hook still running `cleanupTimeoutMs` after the grace period is logged.
   */
  onCleanup(hook: SessionCleanupHook): Disposable {
    const hooks = internals.get(this)!.hooks;
    hooks.add(hook);
    return { dispose: () => void hooks.delete(hook) };
  }
}

/** How a session ends. */
export interface EndOptions {
  /** Why, sent in `session.ended`. */
  reason: string;
  /** SIGTERM-to-SIGKILL grace for the cleanup hooks. */
  graceMs: number;
  /** Run before the hooks (the `onSessionStop` handlers). */
  before?: () => Promise<void>;
  /** Send `session.ended` (false when the harness no longer knows the session). */
  notify: boolean;
}

/** What the session table needs. */
export interface SessionTableDeps {
  clock: Clock;
  logger: Logger;
  /** How long hooks may run past the grace period before the session ends without them. */
  cleanupTimeoutMs: number;
  /**
   * The durable events, which an end lets drain before `session.ended` (its tool calls it waits
   * for through the cleanup hook the call runner registers).
   */
  events: { idle(sessionId: string): Promise<void> };
  /** Where `session.ended` goes, delivered until accepted with `delivery`. */
  link: ConnectionLink;
  delivery: DeliveryOptions;
}

/** The sessions of one client. */
export class SessionTable {
  readonly #deps: SessionTableDeps;
  readonly #sessions = new Map<string, ExecutorSession>();

  constructor(deps: SessionTableDeps) {
    this.#deps = deps;
  }

  /** Sessions not yet ended (stopping ones included: they still hold resources). */
  get size(): number {
    return this.#sessions.size;
  }

  /** The ids of the sessions held. */
  ids(): string[] {
    return [...this.#sessions.keys()];
  }

  /** Every session held. */
  all(): ExecutorSession[] {
    return [...this.#sessions.values()];
  }

  /** The session with this id, if held. */
  get(sessionId: string): ExecutorSession | undefined {
    return this.#sessions.get(sessionId);
  }

  /** Adds a session for an accepted `session.assign`. */
  add(params: SessionAssignParams): ExecutorSession {
    const session = new ExecutorSession(params);
    this.#sessions.set(session.id, session);
    return session;
  }

  /** Forgets a session whose assignment was refused, aborting its signal with `reason`. */
  remove(session: ExecutorSession, reason?: unknown): void {
    if (this.#sessions.get(session.id) === session) this.#sessions.delete(session.id);
    const state = internals.get(session)!;
    state.state = "ended";
    state.controller.abort(reason);
  }

  /** Marks the assignment answered: `session.ready` may now follow it. */
  markAccepted(session: ExecutorSession): void {
    internals.get(session)!.accepted.resolve();
  }

  /** Resolves once the assignment is answered. */
  accepted(session: ExecutorSession): Promise<void> {
    return internals.get(session)!.accepted.promise;
  }

  /** Marks the session ready. */
  markReady(session: ExecutorSession): void {
    const state = internals.get(session)!;
    if (state.state === "assigned") state.state = "ready";
  }

  /** Whether the session takes new tool calls. */
  isLive(session: ExecutorSession): boolean {
    const state = internals.get(session)!.state;
    return state === "assigned" || state === "ready";
  }

  /**
   * Ends a session (idempotent: a second call joins the first). Resolves once `session.ended`
   * is accepted (or right after cleanup when `notify` is false).
   */
  end(session: ExecutorSession, options: EndOptions): Promise<void> {
    const state = internals.get(session)!;
    if (state.ending) {
      if (options.notify) return state.ending;
      // A client stop joins an end under way (a session.stop, say) but is not held by it past its
      // own bound: a stop handler that never returns must not keep the client from stopping.
      const { clock } = this.#deps;
      const giveUp = new AbortController();
      const bound = sleep(clock, options.graceMs + this.#deps.cleanupTimeoutMs, giveUp.signal)
        .catch(() => {});
      return Promise.race([state.ending, bound]).finally(() => giveUp.abort());
    }
    state.state = "stopping";
    state.accepted.resolve();
    state.ending = this.#end(session, state, options);
    return state.ending;
  }

  async #end(
    session: ExecutorSession,
    state: SessionInternals,
    options: EndOptions,
  ): Promise<void> {
    // Let the caller's answer (session.stop's result) go out before anything else.
    await Promise.resolve();
    const { clock, logger } = this.#deps;
    state.controller.abort(new SessionEndedSignal(session.id, options.reason));
    const grace = new AbortController();
    const graceTimer = clock.setTimeout(
      () => grace.abort(new SessionEndedSignal(session.id, "grace period over")),
      options.graceMs,
    );
    const cleanup: SessionCleanup = {
      sessionId: session.id,
      reason: options.reason,
      graceMs: options.graceMs,
      graceSignal: grace.signal,
    };
    const run = async (what: string, fn: () => void | Promise<void>) => {
      try {
        await fn();
      } catch (error) {
        logger.warn(`session ${what} failed`, {
          session_id: session.id,
          error: describeError(error),
        });
      }
    };
    const work = (async () => {
      if (options.before) await run("stop handler", options.before);
      await Promise.all([...state.hooks].map((hook) => run("cleanup hook", () => hook(cleanup))));
    })();
    // Hooks that outlive the grace period by more than cleanupTimeoutMs are reported. With
    // session.ended to send, they are still waited for: it goes out only once every process of
    // the session is gone (SIGKILL has been sent by then; only a process stuck in the kernel
    // lasts). Without (client stop, not resumed), the session is let go.
    const giveUp = new AbortController();
    const late = sleep(clock, options.graceMs + this.#deps.cleanupTimeoutMs, giveUp.signal).then(
      () => "late" as const,
      () => "done" as const,
    );
    const outcome = await Promise.race([work.then(() => "done" as const), late]);
    giveUp.abort();
    clock.clearTimeout(graceTimer);
    if (outcome === "late") {
      logger.warn(
        options.notify
          ? "session cleanup did not finish within the grace period: session.ended waits for it"
          : "session cleanup did not finish within the grace period: the session is let go",
        { session_id: session.id },
      );
      if (options.notify) await work;
    }
    if (!grace.signal.aborted) grace.abort(new SessionEndedSignal(session.id, "cleanup done"));
    await this.#deps.events.idle(session.id);
    if (this.#sessions.get(session.id) === session) this.#sessions.delete(session.id);
    state.state = "ended";
    if (options.notify) await this.#sendEnded(session.id, options.reason);
  }

  async #sendEnded(sessionId: string, reason: string): Promise<void> {
    const { link, delivery, logger } = this.#deps;
    try {
      await deliver(link, "session.ended", { session_id: sessionId, reason }, delivery);
    } catch (error) {
      logger.warn("session.ended not delivered", {
        session_id: sessionId,
        error: describeError(error),
      });
    }
  }
}

/** The abort reason of a session's signal and its calls' signals when the session ends. */
export class SessionEndedSignal extends Error {
  /** The session. */
  readonly sessionId: string;
  /** Why it ended. */
  readonly reason: string;
  /** Records which session ended and why. */
  constructor(sessionId: string, reason: string) {
    super(`session ${sessionId} ended: ${reason}`);
    this.name = "SessionEndedSignal";
    this.sessionId = sessionId;
    this.reason = reason;
  }
}
