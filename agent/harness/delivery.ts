/**
 * The requests the agent platform makes of an executor (turn starts, inputs, cancels, closes,
 * answers, custom tool results), sent until the executor answers: across its reconnects within
 * the lease, by the shared retry rule, until it is gone.
 */
import { ExecutorUnavailableError } from "../../harness/errors.ts";
import type { ExecutorEvent, ExecutorHandle } from "../../harness/handles.ts";
import { ProtocolError, RequestAbortedError } from "../../protocol/errors.ts";
import type { HarnessRequestMethod, RequestMap } from "../../protocol/generated/contract.ts";
import { ErrorCode } from "../../protocol/generated/errors.ts";
import type { CallOptions, Disposable } from "../../protocol/peer.ts";
import { aborted, raceSignal, throwIfAborted } from "../../protocol/abort.ts";
import { retrying, type RetryVerdict, retryVerdict } from "../../protocol/retry.ts";
import { AgentPlatformDetachedError } from "./errors.ts";
import type { PlatformContext } from "./context.ts";

/**
 * Sends an idempotent request until the executor answers: across reconnects within the lease;
 * it stops when the executor is gone (`ExecutorUnavailableError`), `signal` aborts, or `stop`
 * returns an answer to use instead.
 */
export function deliver<M extends HarnessRequestMethod>(
  ctx: PlatformContext,
  executor: ExecutorHandle,
  method: M,
  params: RequestMap[M]["params"],
  options: CallOptions,
  stop?: () => RequestMap[M]["result"] | undefined,
): Promise<RequestMap[M]["result"]> {
  const signal = options.signal;
  const instead = Symbol("instead");
  let answer: RequestMap[M]["result"] | undefined;
  return retrying(async () => {
    throwIfAborted(signal, method);
    const early = stop?.();
    if (early !== undefined) {
      answer = early;
      throw instead;
    }
    if (executor.gone) throw new ExecutorUnavailableError(executor.id, "gone");
    if (!executor.connected) {
      await reconnected(ctx, executor, method, signal);
      throw RECONNECTED;
    }
    return await executor.request(method, params, options);
  }, {
    clock: ctx.clock,
    policy: ctx.options.retry ?? { initialDelayMs: 250, maxDelayMs: 10_000 },
    random: ctx.options.random ?? Math.random,
    ...(signal ? { signal } : {}),
    classify: (error) => error === instead ? "fail" : deliveryVerdict(error),
  }).catch((error) => {
    if (error === instead) return answer!;
    if (signal?.aborted && !(error instanceof RequestAbortedError)) {
      throw new RequestAbortedError(method, signal.reason);
    }
    throw error;
  });
}

/** Resolves once `executor` is connected again; rejects when it is gone or `signal` aborts. */
function reconnected(
  ctx: PlatformContext,
  executor: ExecutorHandle,
  method: string,
  signal?: AbortSignal,
): Promise<void> {
  const host = ctx.host;
  if (!host) return Promise.reject(new AgentPlatformDetachedError());
  const refused = aborted(signal, method);
  if (refused) return refused;
  let sub!: Disposable;
  const back = new Promise<void>((resolve, reject) => {
    const done = (settle: () => void) => {
      sub.dispose();
      settle();
    };
    sub = host.onExecutor((event: ExecutorEvent) => {
      if (event.executor.id !== executor.id) return;
      if (event.type === "gone") {
        done(() => reject(new ExecutorUnavailableError(executor.id, "gone")));
      } else if (executor.connected) done(resolve);
    });
    // It may have come back (or gone) before the listener was in place.
    if (executor.gone) done(() => reject(new ExecutorUnavailableError(executor.id, "gone")));
    else if (executor.connected) done(resolve);
  });
  return raceSignal(back, signal, method, () => sub.dispose());
}

/** Thrown inside an attempt once the executor is back: the next attempt goes at once. */
const RECONNECTED = Symbol("reconnected");

/**
 * Whether a request to the executor is sent again, and when: the shared rule (a lost connection
 * at once, a lost answer or -32004 after the backoff), with the executor's own disconnect and
 * reconnect as lost connections; -32009 and a `draining` -32004 are final, because the caller
 * must see them (a full executor, one going away).
 */
function deliveryVerdict(error: unknown): RetryVerdict {
  if (error === RECONNECTED) return "again";
  if (error instanceof ExecutorUnavailableError) {
    return error.reason === "disconnected" ? "again" : "fail";
  }
  if (
    error instanceof ProtocolError &&
    (error.code === ErrorCode.RESOURCE_EXHAUSTED || error.reason === "draining")
  ) {
    return "fail";
  }
  return retryVerdict(error);
}
