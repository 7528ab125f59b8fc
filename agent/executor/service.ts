/**
 * The agent capability on one executor client: it serves `turn.start`, `turn.input`,
 * `turn.cancel`, `session.close` (and hands `interaction.response` and
 * `agent.custom_tool_result` to their parts), holds the agent sessions, and runs each turn
 * through the handler from its acceptance to its idle event. What a turn does while it runs goes
 * to the parts in `events.ts`, `interactions.ts`, `custom-tools.ts` and `tokens.ts`.
 */
import type { ExecutorClient } from "../../executor/client.ts";
import type { ExecutorExtensionHost } from "../../executor/extension.ts";
import type { SessionCleanup } from "../../executor/sessions.ts";
import { describeError, sleep } from "../../executor/timing.ts";
import type {
  Ack,
  AgentEvent,
  Capabilities,
  SessionCloseParams,
  SessionCloseResult,
  TurnCancelParams,
  TurnCancelResult,
  TurnInputParams,
  TurnStartParams,
  TurnStartResult,
} from "../../protocol/generated/contract.ts";
import {
  ConflictError,
  ResourceExhaustedError,
  UnavailableError,
} from "../../protocol/generated/errors.ts";
import type { Disposable, ReplyHooks } from "../../protocol/peer.ts";
import { BoundedSet, RecentIds } from "../../protocol/bounded-set.ts";
import { traceContextOf } from "../../protocol/trace-context.ts";
import { ServiceContext } from "./context.ts";
import { AgentTurnError, TurnCanceledError, TurnEndedError } from "./errors.ts";
import { CustomTools } from "./custom-tools.ts";
import { TurnEvents } from "./events.ts";
import { TurnInteractions } from "./interactions.ts";
import type { ServeAgentOptions } from "./options.ts";
import { cancelRun, type SessionState, TurnRun } from "./state.ts";
import { TurnTokens } from "./tokens.ts";
import { agentTurn, type TurnParts } from "./turn.ts";
import type { AgentHandler, TurnEnd } from "./types.ts";

/** The agent capability served on one client: its methods, sessions and turns. */
export class AgentService {
  readonly #ctx: ServiceContext;
  readonly #handler: AgentHandler;
  readonly #disposables: Disposable[] = [];
  /** The parts every turn's calls go to. */
  readonly #parts: TurnParts;
  readonly #onDisposed: () => void;
  #disposed = false;

  constructor(
    client: ExecutorClient,
    host: ExecutorExtensionHost,
    handler: AgentHandler,
    options: ServeAgentOptions,
    onDisposed: () => void,
  ) {
    const ctx = this.#ctx = new ServiceContext(client, host, options);
    this.#handler = handler;
    this.#onDisposed = onDisposed;
    const events = new TurnEvents(ctx);
    const interactions = new TurnInteractions(ctx);
    const customTools = new CustomTools(ctx, events);
    this.#parts = { events, interactions, customTools, tokens: new TurnTokens(ctx) };
    const agent: Record<string, unknown> = {};
    if (options.maxSessions !== undefined) agent.max_sessions = options.maxSessions;
    if (options.customTools) agent.custom_tools = true;
    // Contributed first, so the methods registered below publish the complete object.
    this.#disposables.push(
      host.contributeCapabilities(() => ({ agent } as Capabilities)),
      client.onRequest("turn.start", (params, context) => this.#turnStart(params, context)),
      client.onRequest("turn.input", (params) => this.#turnInput(params)),
      client.onRequest("turn.cancel", (params) => this.#turnCancel(params)),
      client.onRequest("session.close", (params) => this.#sessionClose(params)),
      client.onRequest(
        "interaction.response",
        (params, context) => interactions.respond(params, context),
      ),
    );
    if (options.customTools) {
      this.#disposables.push(
        client.onRequest("agent.custom_tool_result", (params) => customTools.result(params)),
      );
    }
  }

  /** The agent sessions held now. */
  sessionIds(): string[] {
    return [...this.#ctx.sessions.keys()];
  }

  /** The running turn of a session, if any. */
  runningTurn(sessionId: string): string | undefined {
    const run = this.#ctx.sessions.get(sessionId)?.run;
    return run && !run.finished ? run.turnId : undefined;
  }

  /** Withdraws the methods and ends every agent session. */
  async dispose(): Promise<void> {
    if (this.#disposed) return;
    this.#disposed = true;
    for (const disposable of this.#disposables.splice(0)) disposable.dispose();
    this.#onDisposed();
    await Promise.all(
      [...this.#ctx.sessions.values()].map((state) =>
        this.#ctx.host.endSession(state.exec, "agent_disposed", true)
      ),
    );
  }

  // ---- turn.start ----------------------------------------------------------------------------

  async #turnStart(params: TurnStartParams, reply: ReplyHooks): Promise<TurnStartResult> {
    let state = this.#ctx.sessions.get(params.session_id);
    if (state?.closing) {
      // session.close (or the session's end) is still under way; the next conversation waits.
      throw new UnavailableError("the session is closing", { reason: "session_closing" });
    }
    if (state) {
      const run = state.run;
      if (run?.turnId === params.turn_id) {
        const result = await run.accepted.promise;
        run.refresh(params.metadata, this.#ctx.clock.now());
        return { ...result, duplicate: true };
      }
      if (state.turnIds.has(params.turn_id)) return this.#startResult(state, params, true);
      if (run && !run.finished) {
        throw new ConflictError("a turn is running: use turn.input", {
          reason: "turn_running",
          turn_id: run.turnId,
        });
      }
    } else {
      if (this.#ctx.client.draining) throw new UnavailableError("draining", { reason: "draining" });
      const max = this.#ctx.options.maxSessions;
      if (max !== undefined && this.#ctx.sessions.size >= max) {
        throw new ResourceExhaustedError(`at most ${max} agent sessions`, {
          reason: "max_sessions",
        });
      }
      const held = this.#ctx.client.session(params.session_id);
      if (held?.state === "stopping") {
        // The previous conversation's session is still ending (its session.ended is on the way).
        throw new UnavailableError("the session is closing", { reason: "session_closing" });
      }
      if (held) {
        throw new ConflictError("the session is held as an assigned session", {
          reason: "session_exists",
        });
      }
      state = this.#openState(params.session_id);
    }
    const run = new TurnRun(params, this.#ctx.clock.now());
    run.trace = traceContextOf(params);
    const telemetry = this.#ctx.host.telemetry;
    if (telemetry) {
      run.span = telemetry.start("turn.start", "server", {
        "bma.session_id": params.session_id,
        "bma.turn_id": params.turn_id,
      }, run.trace);
      run.trace = run.span.trace ?? run.trace;
    }
    run.turn = agentTurn(this.#parts, state, run, !state.opened);
    if (run.model.token) this.#ctx.host.addSecret(run.model.token);
    if (run.tools.token) this.#ctx.host.addSecret(run.tools.token);
    run.controller.signal.addEventListener("abort", () => {
      this.#endWaits(state, run, run.controller.signal.reason, "turn_canceled");
      // A canceled turn takes no more input: a loop reading the inputs ends too.
      run.inputs.end();
    }, { once: true });
    state.run = run;
    if (!state.opened) {
      try {
        const opened = await this.#handler.openTurn?.(run.turn);
        state.opened = true;
        state.ref = (opened && opened.executorSessionRef) ?? params.executor_session_ref;
      } catch (error) {
        if (state.run === run) state.run = undefined;
        run.state = "ended";
        run.span?.end(error);
        run.accepted.reject(error);
        run.done.resolve();
        // A conversation that never opened is not held.
        if (!state.opened && !state.closing) {
          state.closing = Promise.resolve();
          this.#forget(state);
          void this.#ctx.host.endSession(state.exec, "open_failed", false);
        }
        throw error;
      }
    }
    state.turnIds.add(params.turn_id);
    const result = this.#startResult(state, params, false);
    run.accepted.resolve(result);
    // The turn runs once its acceptance is on the wire: its events follow the answer.
    reply.afterReply(() => void this.#run(state, run));
    return result;
  }

  #startResult(state: SessionState, params: TurnStartParams, duplicate: boolean): TurnStartResult {
    return {
      turn_id: params.turn_id,
      accepted: true,
      ...(state.ref !== undefined ? { executor_session_ref: state.ref } : {}),
      ...(duplicate ? { duplicate: true } : {}),
    };
  }

  #openState(sessionId: string): SessionState {
    const exec = this.#ctx.host.openSession(sessionId);
    const state: SessionState = {
      id: sessionId,
      exec,
      sequence: 0,
      ref: undefined,
      opened: false,
      turnIds: new BoundedSet<string>(4096),
      inputIds: new BoundedSet<string>(4096),
      run: undefined,
      closing: undefined,
      eventIds: new RecentIds<string>(50_000),
      pending: new Set(),
      interactions: new Map(),
      customWaits: new Map(),
    };
    this.#ctx.sessions.set(sessionId, state);
    exec.onCleanup((cleanup) => this.#cleanup(state, cleanup));
    return state;
  }

  async #run(state: SessionState, run: TurnRun): Promise<void> {
    const signal = run.controller.signal;
    run.state = "running";
    this.#parts.events.write(state, run, { type: "session.status_running" }, {}, true);
    let end: void | TurnEnd = undefined;
    let failure: unknown;
    let failed = false;
    if (!signal.aborted) {
      try {
        end = await this.#untilGraceAfterCancel(
          run,
          Promise.resolve().then(() => this.#handler.runTurn(run.turn)),
        );
      } catch (error) {
        failed = true;
        failure = error;
      }
    }
    run.state = "ending";
    let idle: AgentEvent;
    if (signal.aborted) {
      const reason = signal.reason instanceof TurnCanceledError ? signal.reason.reason : "canceled";
      idle = { type: "session.status_idle", turn_outcome: "canceled", stop_reason: reason };
    } else if (failed) {
      this.#ctx.logger.warn("runTurn failed", {
        session_id: state.id,
        turn_id: run.turnId,
        error: describeError(failure),
      });
      const error = failure instanceof AgentTurnError
        ? { message: this.#ctx.host.scrub(failure.message), code: failure.code }
        : { message: "the agent loop failed", code: "agent_failed" };
      this.#parts.events.write(state, run, { type: "session.error", error }, {}, true);
      idle = { type: "session.status_idle", turn_outcome: "failed", stop_reason: "error" };
    } else {
      idle = {
        type: "session.status_idle",
        turn_outcome: (end && end.outcome) ?? "completed",
        stop_reason: (end && end.stop_reason) ?? "end_turn",
      };
    }
    this.#endWaits(state, run, new TurnEndedError(run.turnId), "turn_ended");
    const unread = run.inputs.drain();
    run.inputs.end();
    if (unread.length > 0) {
      // Acknowledged (`ok: true`) but never read by the turn: the brain is told in the session's
      // stream, before the idle event, so it can send them with a new turn.
      const ids = unread.map((input) => input.input_id);
      this.#ctx.logger.warn("the turn ended without reading inputs it was sent", {
        session_id: state.id,
        turn_id: run.turnId,
        input_ids: ids,
      });
      this.#parts.events.write(
        state,
        run,
        {
          type: "session.error",
          error: {
            message: `the turn ended without reading ${unread.length} input(s): ` +
              ids.slice(0, 10).join(", ") + (ids.length > 10 ? ", …" : ""),
            code: "input_not_read",
          },
        },
        {},
        true,
      );
    }
    // The session takes the next turn.start from here: the idle event is the turn's last.
    if (state.run === run) state.run = undefined;
    this.#parts.events.write(state, run, idle, {}, true);
    run.state = "ended";
    if (run.span) {
      run.span.set("bma.turn.outcome", (idle as { turn_outcome: string }).turn_outcome);
      run.span.end(failed ? failure : undefined);
    }
    run.done.resolve();
  }

  /** `work`, or (once the turn is canceled) the end of the cancel grace period if sooner. */
  #untilGraceAfterCancel<T>(run: TurnRun, work: Promise<T>): Promise<T | void> {
    const signal = run.controller.signal;
    const stopGrace = new AbortController();
    return new Promise<T | void>((resolve, reject) => {
      work.then(resolve, reject).finally(() => stopGrace.abort());
      const onAbort = () => {
        sleep(this.#ctx.clock, this.#ctx.options.cancelGraceMs ?? 5_000, stopGrace.signal).then(
          () => {
            this.#ctx.logger.warn(
              "runTurn did not return after the cancel: the turn ends without it",
              {
                session_id: run.params.session_id,
                turn_id: run.turnId,
              },
            );
            resolve();
          },
          () => {},
        );
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Ends what a turn still waits for; open interactions are withdrawn with `why`. */
  #endWaits(state: SessionState, run: TurnRun, reason: unknown, why: string): void {
    this.#parts.interactions.endFor(state, run, reason, why);
    this.#parts.customTools.endFor(state, run, reason);
  }

  // ---- turn.input / turn.cancel ---------------------------------------------------------------

  #turnInput(params: TurnInputParams): Ack {
    const state = this.#ctx.sessions.get(params.session_id);
    // A repeat is acknowledged even if the turn ended meanwhile: the input was delivered.
    if (state?.inputIds.has(params.input_id)) return { ok: true, duplicate: true };
    const run = state?.run;
    if (!state || state.closing || !run || run.finished || run.turnId !== params.turn_id) {
      throw new ConflictError("the turn is not running: start a new turn", {
        reason: "turn_not_running",
        ...(run && !run.finished ? { turn_id: run.turnId } : {}),
      });
    }
    state.inputIds.add(params.input_id);
    run.inputs.push({ input_id: params.input_id, input: params.input });
    return { ok: true };
  }

  #turnCancel(params: TurnCancelParams): TurnCancelResult {
    const state = this.#ctx.sessions.get(params.session_id);
    const run = state?.run;
    if (!state || !run || run.finished) return { canceled: false };
    if (params.turn_id !== undefined && params.turn_id !== run.turnId) return { canceled: false };
    cancelRun(state, run, params.reason ?? "canceled");
    return { canceled: true };
  }

  // ---- session.close and the session's end ----------------------------------------------------

  #sessionClose(params: SessionCloseParams): SessionCloseResult {
    const state = this.#ctx.sessions.get(params.session_id);
    if (!state) return { closed: false };
    state.closing ??= this.#close(state, params.reason ?? "closed");
    return { closed: true };
  }

  /** Cancel, wait for the events to be acknowledged, release, then `session.ended`. */
  async #close(state: SessionState, reason: string): Promise<void> {
    // Let the close's answer go out first.
    await Promise.resolve();
    const run = state.run;
    if (run) {
      cancelRun(state, run, "session_closed");
      await run.done.promise;
    }
    await Promise.allSettled([...state.pending]);
    await this.#release(state, reason);
    await this.#ctx.host.endSession(state.exec, reason, true);
    // Forgotten last: until session.ended is out, a turn.start for the id is told to wait.
    this.#forget(state);
  }

  /** The session ends otherwise (session.stop, not resumed, the client stops). */
  async #cleanup(state: SessionState, cleanup: SessionCleanup): Promise<void> {
    if (state.closing) return;
    state.closing = (async () => {
      const run = state.run;
      if (run) {
        cancelRun(state, run, cleanup.reason);
        await new Promise<void>((resolve) => {
          run.done.promise.then(resolve);
          if (cleanup.graceSignal.aborted) resolve();
          cleanup.graceSignal.addEventListener("abort", () => resolve(), { once: true });
        });
      }
      await this.#release(state, cleanup.reason);
      this.#forget(state);
    })();
    await state.closing;
  }

  /** Releases the local conversation (the handler's closeSession). */
  async #release(state: SessionState, reason: string): Promise<void> {
    try {
      await this.#handler.closeSession?.(state.id, { reason });
    } catch (error) {
      this.#ctx.logger.warn("closeSession failed", {
        session_id: state.id,
        error: describeError(error),
      });
    }
  }

  #forget(state: SessionState): void {
    if (this.#ctx.sessions.get(state.id) === state) this.#ctx.sessions.delete(state.id);
  }
}
