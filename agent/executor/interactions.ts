/**
 * The interactions of the agent capability's turns on the executor end: a turn asks the
 * platform (`interaction.request`, idempotent by its id and resent until answered), and the
 * first answer wins — the platform's (`interaction.response`), a local one, or `expired` at its
 * deadline; an interaction answered otherwise is withdrawn (`interaction.cancel`).
 */
import { ClientStoppedError } from "../../executor/errors.ts";
import { deferred, describeError } from "../../executor/timing.ts";
import type { TimerHandle } from "../../protocol/clock.ts";
import type {
  InteractionRequestParams,
  InteractionResponseParams,
  InteractionResponseResult,
} from "../../protocol/generated/contract.ts";
import { RequestAbortedError } from "../../protocol/errors.ts";
import { randomId } from "../../protocol/ids.ts";
import type { ReplyHooks } from "../../protocol/peer.ts";
import type { ServiceContext } from "./context.ts";
import { InteractionMismatchError, TurnEndedError } from "./errors.ts";
import { deliver } from "./delivery.ts";
import { type PendingInteraction, rejected, type SessionState, type TurnRun } from "./state.ts";
import type { InteractionAnswer, InteractionRequest, LocalAnswer } from "./types.ts";

/** The interactions of every turn the service runs. */
export class TurnInteractions {
  readonly #ctx: ServiceContext;

  constructor(ctx: ServiceContext) {
    this.#ctx = ctx;
  }

  /**
   * Asks the platform (`interaction.request`, resent until answered) and resolves with the
   * first answer: the platform's, a local one, or `expired` at `expires_at`.
   */
  request(
    state: SessionState,
    run: TurnRun,
    request: InteractionRequest,
    signal: AbortSignal | undefined,
  ): Promise<InteractionAnswer> {
    if (run.finished) return rejected(new TurnEndedError(run.turnId));
    if (run.controller.signal.aborted) return rejected(run.controller.signal.reason);
    if (signal?.aborted) {
      return rejected(new RequestAbortedError("interaction.request", signal.reason));
    }
    const id = request.interaction_id ?? randomId("ix_");
    const existing = state.interactions.get(id);
    if (existing) {
      // A repeat of the open request joins it; the same id for something else is refused.
      const same = existing.kind === request.kind && existing.toolUseId === request.tool_use_id;
      return same ? existing.done.promise : rejected(new InteractionMismatchError(id));
    }
    const expiresAt = request.expires_at instanceof Date
      ? request.expires_at.toISOString()
      : request.expires_at;
    const params: InteractionRequestParams = {
      session_id: state.id,
      turn_id: run.turnId,
      interaction_id: id,
      kind: request.kind,
      ...(request.tool_use_id !== undefined ? { tool_use_id: request.tool_use_id } : {}),
      ...(request.title !== undefined ? { title: request.title } : {}),
      ...(request.prompt !== undefined ? { prompt: request.prompt } : {}),
      ...(request.options !== undefined ? { options: request.options } : {}),
      ...(expiresAt !== undefined ? { expires_at: expiresAt } : {}),
    };
    const pending: PendingInteraction = {
      id,
      run,
      kind: request.kind,
      toolUseId: request.tool_use_id,
      done: deferred<InteractionAnswer>(),
      stop: new AbortController(),
      requested: Promise.resolve(),
      answered: false,
      accepted: undefined,
      platformId: undefined,
      timer: undefined,
    };
    pending.done.promise.catch(() => {});
    state.interactions.set(id, pending);
    if (expiresAt !== undefined) {
      // Local authority: past expires_at the answer is no, whatever the platform says later.
      const delay = Math.max(0, Date.parse(expiresAt) - this.#ctx.clock.now());
      pending.timer = this.#ctx.clock.setTimeout(() => {
        pending.timer = undefined;
        if (pending.answered) return;
        if (!this.#settle(state, pending, { outcome: "expired", local: true })) return;
        this.#withdraw(state, id, "expired");
      }, Number.isFinite(delay) ? delay : 0);
    }
    if (signal) {
      const onAbort = () => {
        const error = new RequestAbortedError("interaction.request", signal.reason);
        if (this.#settle(state, pending, undefined, error)) {
          this.#withdraw(state, id, "withdrawn");
        }
      };
      signal.addEventListener("abort", onAbort, { once: true });
      pending.done.promise.then(
        () => signal.removeEventListener("abort", onAbort),
        () => signal.removeEventListener("abort", onAbort),
      );
    }
    pending.requested = deliver(this.#ctx, "interaction.request", params, pending.stop.signal).then(
      (result) => {
        pending.platformId = result.platform_interaction_id;
        // A repeat of an interaction that already ended without an answer: nothing will follow.
        if (!pending.answered && (result.status === "expired" || result.status === "canceled")) {
          this.#settle(state, pending, { outcome: result.status, local: false });
        }
      },
      (error) => {
        if (!pending.stop.signal.aborted && !pending.answered) {
          this.#settle(state, pending, undefined, error);
        }
      },
    );
    return pending.done.promise;
  }

  /** Answers an open interaction locally; the platform's card is withdrawn. */
  resolve(state: SessionState, interactionId: string, answer: LocalAnswer): boolean {
    const pending = state.interactions.get(interactionId);
    if (!pending || pending.answered) return false;
    const settled = this.#settle(state, pending, {
      outcome: answer.outcome,
      ...(answer.answer !== undefined ? { answer: answer.answer } : {}),
      ...(answer.message !== undefined ? { message: answer.message } : {}),
      local: true,
    });
    if (settled) this.#withdraw(state, interactionId, "resolved_locally");
    return settled;
  }

  /** Settles once: with an answer, or rejected with `error`. False when already settled. */
  #settle(
    state: SessionState,
    pending: PendingInteraction,
    answer: Omit<InteractionAnswer, "interaction_id" | "platform_interaction_id"> | undefined,
    error?: unknown,
  ): boolean {
    if (state.interactions.get(pending.id) !== pending) return false;
    state.interactions.delete(pending.id);
    pending.stop.abort();
    if (pending.timer !== undefined) this.#ctx.clock.clearTimeout(pending.timer);
    if (answer) {
      pending.done.resolve({
        interaction_id: pending.id,
        ...(pending.platformId !== undefined
          ? { platform_interaction_id: pending.platformId }
          : {}),
        ...answer,
      });
    } else pending.done.reject(error);
    return true;
  }

  /** `interaction.cancel`, resent until acknowledged (idempotent by interaction_id). */
  #withdraw(state: SessionState, interactionId: string, reason: string): void {
    deliver(this.#ctx, "interaction.cancel", {
      session_id: state.id,
      interaction_id: interactionId,
      reason,
    }).catch((error) => {
      if (error instanceof ClientStoppedError) return;
      this.#ctx.logger.debug("interaction.cancel not delivered", {
        session_id: state.id,
        interaction_id: interactionId,
        error: describeError(error),
      });
    });
  }

  /** Serves `interaction.response`: the platform's answer, applied after the acceptance. */
  respond(
    params: InteractionResponseParams,
    reply: ReplyHooks,
  ): InteractionResponseResult {
    const state = this.#ctx.sessions.get(params.session_id);
    const pending = state?.interactions.get(params.interaction_id);
    if (!state || !pending || pending.answered) return { accepted: false };
    pending.answered = true;
    const answer = {
      outcome: params.outcome,
      ...(params.answer !== undefined ? { answer: params.answer } : {}),
      ...(params.message !== undefined ? { message: params.message } : {}),
      local: false,
    };
    pending.accepted = answer;
    // The turn goes on once the acceptance is on the wire: what it sends next follows the answer.
    // The answer to the request itself may have come in the same read as this one: apply the
    // platform's answer once that is in (it names the platform id), or a timer turn later at
    // most (on the client's clock), which lets the frames of that read be handled first.
    reply.afterReply(() => {
      let timer: TimerHandle | undefined;
      const soon = new Promise<void>((resolve) => timer = this.#ctx.clock.setTimeout(resolve, 0));
      Promise.race([pending.requested, soon]).then(() => {
        this.#ctx.clock.clearTimeout(timer!);
        this.#settle(state, pending, answer);
      });
    });
    return { accepted: true };
  }

  /** Ends the interactions a turn still waits for; each is withdrawn with `why`. */
  endFor(state: SessionState, run: TurnRun, reason: unknown, why: string): void {
    for (const pending of [...state.interactions.values()]) {
      if (pending.run !== run) continue;
      // Accepted already: the brain was told so, and the platform recorded it resolved.
      if (pending.accepted) {
        this.#settle(state, pending, pending.accepted);
        continue;
      }
      this.#settle(state, pending, undefined, reason);
      this.#withdraw(state, pending.id, why);
    }
  }
}
