/**
 * The requests the executor makes of the harness for the agent capability, sent until the
 * harness answers: the shared retry rule ({@linkcode retryVerdict}) with the client's own
 * "not connected" counted as a lost connection.
 */
import { NotConnectedError } from "../../executor/errors.ts";
import type { ExecutorRequestMethod, RequestMap } from "../../protocol/generated/contract.ts";
import { retrying, type RetryVerdict, retryVerdict } from "../../protocol/retry.ts";
import type { ServiceContext } from "./context.ts";

/**
 * Whether a failed request may be sent again, and when: the shared rule, with the client's
 * "not connected" (a request made between connections) counted as a lost connection.
 */
export function deliveryVerdict(error: unknown): RetryVerdict {
  return error instanceof NotConnectedError ? "again" : retryVerdict(error);
}

/**
 * Sends an idempotent request until the harness answers, across reconnects (the next call
 * waits for the reconnect itself), after retryable refusals with the client's backoff or the
 * harness's `retry_after_ms`.
 */
export function deliver<M extends ExecutorRequestMethod>(
  ctx: ServiceContext,
  method: M,
  params: RequestMap[M]["params"],
  signal?: AbortSignal,
): Promise<RequestMap[M]["result"]> {
  const { clock, retry, random } = ctx.host;
  const options = signal ? { signal } : {};
  return retrying(() => ctx.client.call(method, params, options), {
    clock,
    policy: retry,
    random,
    ...(signal ? { signal } : {}),
    classify: deliveryVerdict,
  });
}
