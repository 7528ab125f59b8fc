/**
 * The envelope of a received message: what is wrong with it, found before any method, id or
 * handler is looked at ({@linkcode envelopeFault}), and the envelope of a frame too deep to
 * parse whole ({@linkcode shallowEnvelope}).
 */
import { ErrorCode } from "./generated/errors.ts";
import {
  failure,
  isJsonRpcId,
  type JsonRpcFailure,
  type JsonRpcId,
  withoutDeepValues,
} from "./jsonrpc.ts";

/** A response with a broken envelope: dropped, as answering it would loop between the peers. */
export const BROKEN_RESPONSE = 1;
/** A notification whose params are neither an object nor an array: dropped, none is answered. */
export const BROKEN_NOTIFICATION = 2;

/**
 * What is wrong with a parsed message's envelope: the failure that answers it, or
 * {@linkcode BROKEN_RESPONSE} or {@linkcode BROKEN_NOTIFICATION} for one dropped unanswered.
 * `undefined` when it is a request (a string method, a valid id), a notification (a string
 * method, no id) or a response (a `result` or an `error`, no method), each with `jsonrpc` 2.0.
 */
export function envelopeFault(
  message: unknown,
): JsonRpcFailure | typeof BROKEN_RESPONSE | typeof BROKEN_NOTIFICATION | undefined {
  if (typeof message !== "object" || message === null) {
    return failure(null, ErrorCode.INVALID_REQUEST, "invalid request: not an object");
  }
  const m = message as Record<string, unknown>;
  const hasId = "id" in m;
  const idOk = hasId && isJsonRpcId(m.id);
  if (m.jsonrpc !== "2.0") {
    // A broken response cannot be answered (that would loop between peers): drop it.
    if (!("method" in m) && ("result" in m || "error" in m)) return BROKEN_RESPONSE;
    return failure(
      idOk ? m.id as JsonRpcId : null,
      ErrorCode.INVALID_REQUEST,
      'invalid request: jsonrpc must be "2.0"',
    );
  }
  if ("method" in m) {
    if (typeof m.method !== "string") {
      return failure(
        idOk ? m.id as JsonRpcId : null,
        ErrorCode.INVALID_REQUEST,
        "invalid request: method must be a string",
      );
    }
    if (hasId && !idOk) {
      return failure(
        null,
        ErrorCode.INVALID_REQUEST,
        "invalid request: id must be a string or a number of at most 2^53 - 1",
      );
    }
    if (m.params !== undefined && (typeof m.params !== "object" || m.params === null)) {
      return hasId
        ? failure(
          m.id as JsonRpcId,
          ErrorCode.INVALID_REQUEST,
          "invalid request: params must be an object or an array",
        )
        : BROKEN_NOTIFICATION;
    }
    return undefined;
  }
  if ("result" in m || "error" in m) return undefined;
  return failure(
    idOk ? m.id as JsonRpcId : null,
    ErrorCode.INVALID_REQUEST,
    "invalid request: neither a request nor a response",
  );
}

/**
 * The envelope of a frame nested deeper than `limit`, read with the deep values cut out: its
 * object, or `undefined` when even that is not a JSON object.
 */
export function shallowEnvelope(
  frame: string,
  limit: number,
): Record<string, unknown> | undefined {
  try {
    const envelope: unknown = JSON.parse(withoutDeepValues(frame, limit));
    if (typeof envelope === "object" && envelope !== null && !Array.isArray(envelope)) {
      return envelope as Record<string, unknown>;
    }
  } catch {
    // Not JSON either: answered like any frame whose id cannot be read.
  }
  return undefined;
}
