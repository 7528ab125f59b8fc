/**
 * A request that failed because the machine ran out of something every request shares (file
 * descriptors, processes, memory) answers the contract's retryable -32009, with the reason,
 * instead of the -32603 an unexpected failure gets: the harness may try it again once load drops.
 */
import { ResourceExhaustedError } from "../../protocol/generated/errors.ts";

/** The `data.reason` of each system error code taken as a resource exhausted. */
const EXHAUSTED: ReadonlyMap<string, string> = new Map([
  ["EMFILE", "too_many_open_files"],
  ["ENFILE", "too_many_open_files"],
  ["EAGAIN", "system_resources"],
  ["ENOMEM", "system_resources"],
]);

/**
 * `error` as the request's answer: a {@linkcode ResourceExhaustedError} when it is a system error
 * of a resource running out (`EMFILE`, `ENFILE`, `EAGAIN`, `ENOMEM`), else `error` itself.
 */
export function answerForSystemError(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  const reason = typeof code === "string" ? EXHAUSTED.get(code) : undefined;
  if (reason === undefined) return error;
  return new ResourceExhaustedError(`the executor's machine is out of resources (${code})`, {
    reason,
  });
}
