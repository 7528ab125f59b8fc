/**
 * Sending to an executor on its registered connection: the one place that knows a request
 * needs a connection (`ExecutorUnavailableError` without one) and gets the harness's request
 * timeout unless the caller chose one.
 */
import type { CallOptions } from "../protocol/peer.ts";
import type {
  HarnessNotificationMethod,
  HarnessRequestMethod,
  NotificationMap,
  RequestMap,
} from "../protocol/generated/contract.ts";
import { ExecutorUnavailableError } from "./errors.ts";
import type { ExecutorEntry } from "./state.ts";

/** `options` with the harness's request timeout, unless they name one. */
export function withTimeout(options: CallOptions, timeoutMs: number | undefined): CallOptions {
  return timeoutMs === undefined || options.timeoutMs !== undefined
    ? options
    : { ...options, timeoutMs };
}

/** Why `executor` cannot be reached now. */
export function unavailable(executor: ExecutorEntry): ExecutorUnavailableError {
  return new ExecutorUnavailableError(executor.id, executor.gone ? "gone" : "disconnected");
}

/** Sends a harness request on the executor's connection. */
export function request<M extends HarnessRequestMethod>(
  executor: ExecutorEntry,
  method: M,
  params: RequestMap[M]["params"],
  options: CallOptions,
  timeoutMs: number | undefined,
): Promise<RequestMap[M]["result"]> {
  const connection = executor.connection;
  if (!connection) return Promise.reject(unavailable(executor));
  return connection.peer.call(method, params, withTimeout(options, timeoutMs));
}

/** Sends a harness notification on the executor's connection; throws without one. */
export function notify<M extends HarnessNotificationMethod>(
  executor: ExecutorEntry,
  method: M,
  params: NotificationMap[M],
): void {
  const connection = executor.connection;
  if (!connection) throw unavailable(executor);
  connection.peer.notify(method, params);
}
