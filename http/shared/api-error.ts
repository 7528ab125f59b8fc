/**
 * The one error answer of the HTTP faces (the brain API, the inspector, the metrics endpoint):
 * a status and the body `{"error": {code, message, data?}}` (docs/brain-api.md "Errors"). A route
 * throws {@linkcode ApiError}; an error of the SDK a route let through is answered by
 * {@linkcode errorAnswer}, the one table from error class to status and code.
 *
 * Portable: web-standard APIs only.
 *
 * @module
 */
import {
  CapabilityNotAdvertisedError,
  FrameTooLargeError,
  InvalidOutgoingParamsError,
  LocalError,
  ProtocolError,
  RequestAbortedError,
  RequestTimeoutError,
} from "../../protocol/errors.ts";
import {
  ExecutorUnavailableError,
  HarnessClosedError,
  NoAgentPlatformError,
  SessionEndedError,
  SessionRefusedError,
  ToolOutcomeUnknownError,
} from "../../harness/errors.ts";
import { StoreFencedError } from "../../harness/store/claim.ts";
import { StoreBusyError, StoreUnavailableError } from "../../harness/store/store.ts";
import { issueData, reportOf, type ZodIssueLike } from "../../protocol/issues.ts";
import type { Logger } from "../../protocol/logger.ts";
import { JsonBodyError, readJsonObject } from "./json-body.ts";
import { jsonAnswer } from "./json-answer.ts";

/** The error member of every error answer of the HTTP faces: `{"error": ApiErrorBody}`. */
export interface ApiErrorBody {
  /** The protocol's JSON-RPC code when the executor refused, else a name (`invalid_params`, ...). */
  code: number | string;
  /** What went wrong. */
  message: string;
  /** Details: the schema's `issues`, a refusal's `reason`, the protocol error's `data`. */
  data?: unknown;
}

/** A refusal a route throws, with its HTTP status. */
export class ApiError extends Error {
  /** The HTTP status that answers it. */
  readonly status: number;
  /** The body's `error` member. */
  readonly error: ApiErrorBody;
  /** A refusal answered with `status` and `{"error": {code, message, data?}}`. */
  constructor(status: number, code: number | string, message: string, data?: unknown) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.error = data === undefined ? { code, message } : { code, message, data };
  }
}

/** The answer of `error`: its status and `{"error": {code, message, data?}}` (`headers` added). */
export function apiErrorAnswer(error: ApiError, headers: Record<string, string> = {}): Response {
  return jsonAnswer(error.status, { error: error.error }, headers);
}

/**
 * The 401 of a face whose `authorize` refused `request`, in `realm`: it says which of the two it
 * is — nothing presented, or a credential that was refused — and quotes nothing presented.
 */
export function unauthorizedAnswer(request: Request, realm: string): Response {
  const presented = request.headers.has("authorization");
  const message = presented
    ? "the credential was refused: check the bearer token"
    : "credential needed: send Authorization: Bearer <token>";
  return jsonAnswer(401, { error: { code: "unauthorized", message } }, {
    "www-authenticate": presented
      ? `Bearer realm="${realm}", error="invalid_token"`
      : `Bearer realm="${realm}"`,
  });
}

/**
 * The `data` of a 400 `invalid_params`: the first issues (path and message), their count, the
 * first one's JSON pointer (`field`) and `truncated` past the count's bound: the same for a body
 * its schema refused and for params the harness refused before sending them.
 */
export function invalidParamsData(issues: readonly ZodIssueLike[]): Record<string, unknown> {
  const { issues: first, ...count } = issueData(reportOf(issues));
  return { issues: first.map(({ path, message }) => ({ path, message })), ...count };
}

/**
 * An error that says this harness is going away (closed, drained, or fenced: another harness took
 * its store over), not that the session or the call has: the next harness goes on with them, so
 * the brain repeats its request there (503 `harness_closed`), never a final 409.
 */
function goneWithThisHarness(error: unknown): boolean {
  return error instanceof HarnessClosedError || error instanceof StoreFencedError ||
    ((error instanceof SessionEndedError || error instanceof ToolOutcomeUnknownError) &&
      error.reason === "harness_closed");
}

/** What an error answers: its status and body. Messages are the SDK's own, never a secret. */
export function errorAnswer(error: unknown): { status: number; error: ApiErrorBody } {
  const answer = (status: number, code: number | string, message: string, data?: unknown) =>
    new ApiError(status, code, message, data);
  if (error instanceof ApiError) return error;
  if (goneWithThisHarness(error)) {
    return answer(
      503,
      "harness_closed",
      "this harness is closing or another took its store over: repeat the request, the next harness answers it",
    );
  }
  // The executor refused: its JSON-RPC error, unchanged.
  if (error instanceof ProtocolError) return answer(409, error.code, error.message, error.data);
  if (error instanceof InvalidOutgoingParamsError) {
    return answer(
      400,
      "invalid_params",
      error.message,
      invalidParamsData(error.issues as readonly ZodIssueLike[]),
    );
  }
  if (error instanceof SessionRefusedError) {
    return answer(409, "session_refused", error.message, { reason: error.reason });
  }
  if (error instanceof SessionEndedError) {
    return answer(409, "session_ended", error.message, { reason: error.reason });
  }
  if (error instanceof CapabilityNotAdvertisedError) {
    return answer(409, "capability_not_advertised", error.message, {
      capability: error.capability,
    });
  }
  if (error instanceof ToolOutcomeUnknownError) {
    return answer(502, "tool_outcome_unknown", error.message, { reason: error.reason });
  }
  if (error instanceof ExecutorUnavailableError) {
    return answer(503, "executor_unavailable", error.message, { reason: error.reason });
  }
  // The store could not record it (full, read-only, locked, unreachable): nothing was done.
  if (error instanceof StoreUnavailableError || error instanceof StoreBusyError) {
    return answer(503, "backend_unavailable", error.message);
  }
  if (error instanceof RequestTimeoutError) return answer(504, "timeout", error.message);
  if (error instanceof RequestAbortedError) return answer(499, "aborted", error.message);
  if (error instanceof NoAgentPlatformError) return answer(501, "not_implemented", error.message);
  // A request the link to the executor cannot carry: never sent.
  if (error instanceof FrameTooLargeError) {
    return answer(413, "payload_too_large", error.message, {
      bytes: error.bytes,
      limit: error.limit,
    });
  }
  if (error instanceof LocalError) return answer(409, "refused", error.message);
  return answer(500, "internal_error", "internal error");
}

/**
 * A face's answer to an error its route let through (hono's `onError`), written by `json`: the
 * status and body of {@linkcode errorAnswer}; an unexpected one is logged, never answered.
 */
export function routeErrorAnswer(
  logger: Logger,
  face: string,
  json: (status: number, body: unknown) => Response,
): (error: unknown) => Response {
  return (error) => {
    const answer = errorAnswer(error);
    if (answer.status === 500) logger.error(`${face} request failed`, { error: String(error) });
    const response = json(answer.status, { error: answer.error });
    // Sent on: the brain repeats the request at the harness that holds the store, in a second.
    if (SENT_ON.has(answer.error.code)) response.headers.set("retry-after", "1");
    return response;
  };
}

/** The codes of a harness that is not (or no longer) the one to ask: `retry-after: 1`. */
const SENT_ON: ReadonlySet<unknown> = new Set(["harness_closed", "unavailable"]);

/**
 * The JSON object of a request's body (`{}` for an empty one; at most `maxBytes`, 128 deep), or
 * an {@linkcode ApiError}: 413 `payload_too_large`, 400 `bad_request` (also for bytes that are
 * not UTF-8), 408 `request_timeout` (the body stopped arriving), 415 `unsupported_media_type` (a
 * charset other than UTF-8).
 */
export async function requestObject(
  request: Request,
  maxBytes: number,
): Promise<Record<string, unknown>> {
  try {
    return await readJsonObject(request, maxBytes);
  } catch (error) {
    if (!(error instanceof JsonBodyError)) throw error;
    throw new ApiError(
      error.status,
      error.status === 413
        ? "payload_too_large"
        : error.status === 408
        ? "request_timeout"
        : error.status === 415
        ? "unsupported_media_type"
        : "bad_request",
      error.message,
    );
  }
}
