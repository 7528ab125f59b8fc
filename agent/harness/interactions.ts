/**
 * The agent platform's interactions: one platform interaction per `interaction.request`,
 * idempotent by `interaction_id` (an `appr_…` id is adopted as the platform id and names the
 * same interaction after an executor restart; a conflicting reuse is refused with -32013 and
 * leaves it unchanged; any other id gets an `int_…` id), the first answer of each kept and
 * delivered to the executor that asked last until it answers, `expired` at `expires_at`,
 * withdrawn when the executor withdraws it before taking an answer or when its session ends, and
 * every change reported to the listeners.
 */
import { describeError } from "../../protocol/errors.ts";
import type { ExecutorHandle } from "../../harness/handles.ts";
import { CallbackDeadline } from "../../harness/scheduler.ts";
import { isPromiseLike, type MaybePromise } from "../../harness/store/store.ts";
import { BoundedSet } from "../../protocol/bounded-set.ts";
import { aborted, raceSignal } from "../../protocol/abort.ts";
import type {
  Ack,
  InteractionCancelParams,
  InteractionRequestParams,
  InteractionRequestResult,
  InteractionResponseParams,
  InteractionResponseResult,
} from "../../protocol/generated/contract.ts";
import { ConflictError, ForbiddenError } from "../../protocol/generated/errors.ts";
import { randomId } from "../../protocol/ids.ts";
import type { CallOptions, Disposable, ReplyHooks } from "../../protocol/peer.ts";
import { isApprovalId } from "../ids.ts";
import { deliver } from "./delivery.ts";
import type { PlatformParts } from "./parts.ts";
import { ACTIVE, type SessionRecord, snapshot, type StoredInteraction } from "./records.ts";
import type { PersistedInteraction } from "./store.ts";
import type {
  InteractionChange,
  PlatformAnswer,
  PlatformInteraction,
  WaitInteractionOptions,
} from "./types.ts";

/** Every interaction the platform holds. */
export class PlatformInteractions {
  readonly #parts: PlatformParts;
  /** By the key an executor names each by (see `#key`). */
  readonly #interactions = new Map<string, StoredInteraction>();
  readonly #byPlatformId = new Map<string, StoredInteraction>();
  readonly #listeners = new Set<(change: InteractionChange) => void>();
  /** Settled interactions, oldest first, for forgetting. */
  readonly #settled: BoundedSet<StoredInteraction>;
  /** The open interactions of each session, withdrawn when it ends. */
  readonly #open = new Map<string, Set<StoredInteraction>>();

  constructor(parts: PlatformParts) {
    this.#parts = parts;
    const options = parts.ctx.options;
    this.#settled = new BoundedSet(options.remember ?? 10_000);
    if (options.onInteraction) this.#listeners.add(options.onInteraction);
    parts.sessions.onEnded((record) => this.#sessionEnded(record));
  }

  /** Every interaction the platform holds (snapshots), oldest first. */
  all(): PlatformInteraction[] {
    return [...this.#byPlatformId.values()].map(snapshot);
  }

  /** An interaction by its platform id. */
  get(id: string): PlatformInteraction | undefined {
    const stored = this.#byPlatformId.get(id);
    return stored ? snapshot(stored) : undefined;
  }

  /** Calls `listener` on every interaction change. */
  onInteraction(listener: (change: InteractionChange) => void): Disposable {
    this.#listeners.add(listener);
    return { dispose: () => void this.#listeners.delete(listener) };
  }

  /** Resolves with an open interaction matching `filter`: one held now, else the next opened. */
  wait(options: WaitInteractionOptions = {}): Promise<PlatformInteraction> {
    const filter = options.filter ?? (() => true);
    const signal = options.signal;
    for (const stored of this.#byPlatformId.values()) {
      if (!stored.announced) continue;
      const view = snapshot(stored);
      if (view.status === "open" && filter(view)) return Promise.resolve(view);
    }
    const refused = aborted(signal, "waitInteraction");
    if (refused) return refused;
    let sub!: Disposable;
    const opened = new Promise<PlatformInteraction>((resolve) => {
      sub = this.onInteraction((change) => {
        const view = change.interaction;
        if (view.status !== "open" || !filter(view)) return;
        sub.dispose();
        resolve(view);
      });
    });
    return raceSignal(opened, signal, "waitInteraction", () => sub.dispose());
  }

  /**
   * Answers an open interaction: the first answer wins (false for a settled or unknown one, and
   * one withdrawn because its session ended).
   * The answer is kept in the harness's store, then goes to the executor that asked last
   * (`interaction.response`), resent until it answers; after an executor restart, its repeat of
   * an `appr_…` request gets it too, as after a restart of the harness.
   */
  respond(id: string, answer: PlatformAnswer): boolean {
    const stored = this.#byPlatformId.get(id);
    if (!stored || !this.#settle(stored, answer)) return false;
    this.#deliverAnswer(stored);
    return true;
  }

  #key(executor: ExecutorHandle, sessionId: string, interactionId: string): string {
    // An approval id is the platform's own id; any other id is only this executor's key.
    return isApprovalId(interactionId)
      ? interactionId
      : `${executor.id}\u0000${sessionId}\u0000${interactionId}`;
  }

  /**
   * `interaction.request`: one platform interaction per request, idempotent by `interaction_id`
   * (see the platform's module header); stored before the executor hears the platform id.
   */
  request(
    executor: ExecutorHandle,
    params: InteractionRequestParams,
    reply: ReplyHooks,
  ): MaybePromise<InteractionRequestResult> {
    const turn = this.#parts.sessions.activeTurn(executor, params.session_id, params.turn_id);
    const key = this.#key(executor, params.session_id, params.interaction_id);
    const epoch = this.#parts.ctx.attached.epoch(executor.id);
    const existing = this.#interactions.get(key);
    if (existing) {
      const sameEpoch = existing.executorId === executor.id && existing.executorEpoch === epoch;
      if (
        existing.kind !== params.kind || existing.sessionId !== params.session_id ||
        (sameEpoch && existing.toolUseId !== params.tool_use_id)
      ) {
        throw new ConflictError("interaction_id names another interaction", {
          reason: "interaction_mismatch",
        });
      }
      // The same interaction, named again (a resend, or a restarted executor): route it here.
      existing.executorId = executor.id;
      existing.executorEpoch = epoch;
      existing.turnId = turn.turnId;
      existing.toolUseId = params.tool_use_id;
      existing.requests++;
      if (existing.withdrawn) {
        // Withdrawn when its session ended; asked again by a live turn, it is open again.
        existing.withdrawn = false;
        existing.status = "open";
        existing.outcome = undefined;
        existing.cancelReason = undefined;
        this.#settled.delete(existing);
        this.#track(existing);
        this.#armExpiry(existing);
      }
      this.#parts.store.keepInteraction(existing);
      reply.afterReply(() => this.#notify("repeated", existing));
      // A restarted executor waits for the answer it lost: send it again.
      if (existing.status === "resolved") {
        reply.afterReply(() => this.#deliverAnswer(existing));
      }
      return this.#requestResult(existing);
    }
    const id = isApprovalId(params.interaction_id) ? params.interaction_id : randomId("int_");
    const stored: StoredInteraction = {
      id,
      key,
      interactionId: params.interaction_id,
      sessionId: params.session_id,
      kind: params.kind,
      turnId: turn.turnId,
      toolUseId: params.tool_use_id,
      title: params.title,
      prompt: params.prompt,
      options: params.options,
      expiresAt: params.expires_at,
      executorId: executor.id,
      executorEpoch: epoch,
      status: "open",
      outcome: undefined,
      answer: undefined,
      message: undefined,
      cancelReason: undefined,
      requests: 1,
      expiry: undefined,
      announced: false,
      taken: false,
      withdrawn: false,
    };
    // Kept before the executor hears the platform id: a harness started again knows it.
    const kept = this.#parts.store.keepInteraction(stored, true);
    const opened = () => {
      this.#interactions.set(key, stored);
      this.#byPlatformId.set(id, stored);
      this.#track(stored);
      this.#armExpiry(stored);
      // Announced once the answer is on the wire, so an answer cannot overtake it.
      reply.afterReply(() => {
        stored.announced = true;
        this.#notify("opened", stored);
      });
      return this.#requestResult(stored);
    };
    return isPromiseLike(kept) ? Promise.resolve(kept).then(opened) : opened();
  }

  /** Settles an interaction as expired when its `expires_at` passes. */
  #armExpiry(stored: StoredInteraction): void {
    if (stored.expiresAt === undefined || stored.status !== "open") return;
    const host = this.#parts.ctx.host;
    if (!host) return;
    const at = Date.parse(stored.expiresAt);
    stored.expiry = new CallbackDeadline(() => {
      stored.expiry = undefined;
      if (this.#settle(stored, { outcome: "expired" })) this.#deliverAnswer(stored);
    });
    host.scheduler.set(stored.expiry, Number.isFinite(at) ? at : this.#parts.ctx.clock.now());
  }

  #disarmExpiry(stored: StoredInteraction): void {
    if (stored.expiry) this.#parts.ctx.host?.scheduler.clear(stored.expiry);
    stored.expiry = undefined;
  }

  #requestResult(stored: StoredInteraction): InteractionRequestResult {
    return {
      interaction_id: stored.interactionId,
      platform_interaction_id: stored.id,
      status: stored.status,
    };
  }

  /**
   * `interaction.cancel`: the executor withdraws an open interaction, or one answered whose
   * answer it has not taken (a cancel of the turn raced the answer, it was answered locally): the
   * answer did not count, and the interaction is recorded withdrawn.
   */
  cancel(executor: ExecutorHandle, params: InteractionCancelParams): Ack {
    const stored = this.#interactions.get(
      this.#key(executor, params.session_id, params.interaction_id),
    );
    const withdrawable = stored?.status === "open" ||
      (stored?.status === "resolved" && !stored.taken);
    if (!stored || !withdrawable) return { ok: true, duplicate: true };
    if (stored.executorId !== executor.id) {
      throw new ForbiddenError("the interaction belongs to another executor", {
        reason: "forbidden",
      });
    }
    this.#withdraw(stored, params.reason);
    return { ok: true };
  }

  /** Withdraws an interaction (`canceled`): every client dismisses it. */
  #withdraw(stored: StoredInteraction, reason: string | undefined): void {
    stored.status = "canceled";
    stored.outcome = "canceled";
    stored.answer = undefined;
    stored.message = undefined;
    stored.cancelReason = reason;
    this.#disarmExpiry(stored);
    this.#track(stored);
    this.#parts.store.keepInteraction(stored);
    this.#notify("canceled", stored);
    this.#retire(stored);
  }

  /**
   * A session ended (lost, its lease expired, closed, stopped): no turn of it waits for an answer
   * any more, so its open interactions are withdrawn (`session_ended`), and an answer would be
   * refused. A restarted executor that asks again for one (an `appr_…` id) opens it again.
   */
  #sessionEnded(record: SessionRecord): void {
    const open = this.#open.get(record.id);
    if (!open) return;
    const current = this.#parts.sessions.get(record.id);
    for (const stored of [...open]) {
      // Asked again meanwhile by a turn of a newer conversation under the id: that turn's now.
      const turn = current !== record && current && !current.ended
        ? current.turns.get(stored.turnId)
        : undefined;
      if (turn && ACTIVE.has(turn.state)) continue;
      stored.withdrawn = true;
      this.#withdraw(stored, "session_ended");
      // Told as any canceled interaction is (`interaction.response`), to an executor still there:
      // one that still holds the session (it ended on the harness's side) stops waiting.
      if (this.#parts.ctx.host?.executor(stored.executorId)) this.#deliverAnswer(stored);
    }
  }

  /** Keeps the index of open interactions by session in step with `stored.status`. */
  #track(stored: StoredInteraction): void {
    let open = this.#open.get(stored.sessionId);
    if (stored.status === "open") {
      if (!open) this.#open.set(stored.sessionId, open = new Set());
      open.add(stored);
    } else if (open?.delete(stored) && open.size === 0) {
      this.#open.delete(stored.sessionId);
    }
  }

  /** Records the first answer (in the store too); false when the interaction was settled. */
  #settle(stored: StoredInteraction, answer: PlatformAnswer): boolean {
    if (stored.status !== "open") return false;
    stored.status = answer.outcome === "expired"
      ? "expired"
      : answer.outcome === "canceled"
      ? "canceled"
      : "resolved";
    stored.outcome = answer.outcome;
    stored.answer = answer.answer;
    stored.message = answer.message;
    stored.taken = false;
    stored.withdrawn = false;
    this.#disarmExpiry(stored);
    this.#track(stored);
    this.#parts.store.keepInteraction(stored);
    this.#notify("settled", stored);
    this.#retire(stored);
    return true;
  }

  /** Remembers a settled interaction; the oldest beyond the limit are forgotten. */
  #retire(stored: StoredInteraction): void {
    const oldest = this.#settled.add(stored);
    if (!oldest) return;
    if (this.#interactions.get(oldest.key) === oldest) this.#interactions.delete(oldest.key);
    if (this.#byPlatformId.get(oldest.id) === oldest) this.#byPlatformId.delete(oldest.id);
    this.#parts.store.dropInteraction(oldest.id);
  }

  #deliverAnswer(stored: StoredInteraction): void {
    const params: InteractionResponseParams = {
      session_id: stored.sessionId,
      interaction_id: stored.interactionId,
      outcome: stored.outcome!,
      ...(stored.answer !== undefined ? { answer: stored.answer } : {}),
      ...(stored.message !== undefined ? { message: stored.message } : {}),
    };
    const executor = this.#parts.ctx.host?.executor(stored.executorId);
    if (!executor) {
      // Delivered when the executor asks again (a repeat names the interaction).
      this.#parts.ctx.logger.info("interaction answer kept for the executor's return", {
        interaction_id: stored.id,
      });
      return;
    }
    // Withdrawn, or open again (a withdrawn one asked again): this answer is not the
    // interaction's any more.
    const stop = () => stored.outcome !== params.outcome ? { accepted: false } : undefined;
    deliver(this.#parts.ctx, executor, "interaction.response", params, {}, stop).then(
      (result) => this.#answered(stored, result),
      (error) => {
        this.#parts.ctx.logger.info("interaction answer not delivered", {
          interaction_id: stored.id,
          error: describeError(error),
        });
      },
    );
  }

  /** The executor answered an `interaction.response`: whether it took the answer. */
  #answered(stored: StoredInteraction, result: InteractionResponseResult): void {
    if (result.accepted) stored.taken = true;
  }

  /**
   * `respondInteraction` on an executor handle: recorded like {@linkcode respond}, then sent.
   * One the platform settled already (answered, expired, withdrawn) is refused without a send:
   * the first answer won there, and the executor must not take another. When the executor
   * withdraws the interaction instead of taking the answer, it is recorded withdrawn
   * ({@linkcode cancel}).
   */
  async sendResponse(
    executor: ExecutorHandle,
    params: InteractionResponseParams,
    options: CallOptions,
  ): Promise<InteractionResponseResult> {
    const stored = this.#interactions.get(
      this.#key(executor, params.session_id, params.interaction_id),
    );
    if (stored && !this.#settle(stored, params)) return { accepted: false };
    const result = await deliver(
      this.#parts.ctx,
      executor,
      "interaction.response",
      params,
      options,
    );
    if (stored) this.#answered(stored, result);
    return result;
  }

  #notify(type: InteractionChange["type"], stored: StoredInteraction): void {
    const change: InteractionChange = { type, interaction: snapshot(stored) };
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch (error) {
        this.#parts.ctx.logger.warn("interaction listener failed", { error: describeError(error) });
      }
    }
    const host = this.#parts.ctx.host;
    if (host?.observing) {
      host.observe({
        type: "interaction",
        at: this.#parts.ctx.clock.now(),
        change: type,
        sessionId: stored.sessionId,
        executorId: stored.executorId,
        interactionId: stored.id,
        status: stored.status,
        interaction: change.interaction,
      });
    }
  }

  /** Adopts the interactions a previous run of the harness kept (see `store.ts`). */
  adopt(rows: [string, PersistedInteraction][]): void {
    for (const [, persisted] of rows) {
      if (this.#byPlatformId.has(persisted.id)) continue;
      const stored: StoredInteraction = {
        ...persisted,
        expiry: undefined,
        announced: true,
        // Not kept: one answered before the restart counts as taken (a cancel does not undo it).
        taken: persisted.status === "resolved",
        withdrawn: persisted.withdrawn ?? false, // not in what an older version stored
      };
      this.#interactions.set(stored.key, stored);
      this.#byPlatformId.set(stored.id, stored);
      if (stored.status !== "open") {
        this.#settled.add(stored);
        continue;
      }
      this.#track(stored);
      this.#armExpiry(stored);
      const session = this.#parts.sessions.get(stored.sessionId);
      if (!session || session.ended) {
        // Its session ended while the harness was down: no turn of it waits any more.
        stored.withdrawn = true;
        this.#withdraw(stored, "session_ended");
      }
    }
  }
}
