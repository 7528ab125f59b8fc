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
import { raceSignal } from "../protocol/abort.ts";
import { ConnectionClosedError } from "../protocol/errors.ts";
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

/**
 * Requests a repeat of which does what the first would have done, or answers what it answered:
 * the reads (`process.read`, `process.wait`, `process.list`, `terminal.read`, `file.download`),
 * `terminal.resize`, `git.credentials` and `session.stop` (a repeat of which answers whether the
 * session is still stopping), and the starts that name their own id (`process.start` with a
 * `process_id`, `terminal.open` with a `terminal_id`: a repeat answers `duplicate`).
 */
export function repeatable(method: string, params: unknown): boolean {
  if (REPEATABLE.has(method)) return true;
  const given = params as Record<string, unknown>;
  if (method === "process.start") return typeof given.process_id === "string";
  if (method === "terminal.open") return typeof given.terminal_id === "string";
  return false;
}

const REPEATABLE: ReadonlySet<string> = new Set([
  "process.read",
  "process.wait",
  "process.list",
  "terminal.read",
  "file.download",
  "terminal.resize",
  "git.credentials",
  "session.stop",
]);

/**
 * `send()`, sent again once the executor is back when the connection it went on (or the lack
 * of one) was lost while the executor is away within its lease, as tool calls wait: until it is
 * answered, refused, timed out, the executor is gone, or `signal` aborts. Only for
 * {@linkcode repeatable} requests.
 */
export async function repeatedAcrossReconnects<T>(
  executor: ExecutorEntry,
  send: () => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
  for (;;) {
    const on = executor.connection;
    try {
      return await send();
    } catch (error) {
      const away = error instanceof ConnectionClosedError ||
        (error instanceof ExecutorUnavailableError && error.reason === "disconnected");
      if (!away || executor.gone) throw error;
      // Registered again meanwhile (a new connection replaced the lost one): at once.
      if (executor.connection === undefined || executor.connection === on) {
        await raceSignal(executor.nextConnection(signal), signal, "request");
      }
      if (executor.gone) throw unavailable(executor);
    }
  }
}
