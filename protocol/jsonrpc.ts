/** JSON-RPC 2.0 envelopes and the checks that classify a received message. */
import type { JsonRpcErrorObject } from "./errors.ts";

/** A request id. `1` and `"1"` are different ids. */
export type JsonRpcId = string | number;

/** A request: it has an id and expects a response. */
export interface JsonRpcRequest {
  /** Always `"2.0"`. */
  jsonrpc: "2.0";
  /** The id the response echoes. */
  id: JsonRpcId;
  /** The method called. */
  method: string;
  /** The method's params. */
  params?: unknown;
}

/** A notification: no id, no response. */
export interface JsonRpcNotification {
  /** Always `"2.0"`. */
  jsonrpc: "2.0";
  /** The method. */
  method: string;
  /** The method's params. */
  params?: unknown;
}

/** A successful response. */
export interface JsonRpcSuccess {
  /** Always `"2.0"`. */
  jsonrpc: "2.0";
  /** The id of the request answered. */
  id: JsonRpcId;
  /** The method's result. */
  result: unknown;
}

/** An error response; `id` is null when the request's id could not be read. */
export interface JsonRpcFailure {
  /** Always `"2.0"`. */
  jsonrpc: "2.0";
  /** The id of the request answered, or null. */
  id: JsonRpcId | null;
  /** What went wrong. */
  error: JsonRpcErrorObject;
}

/** Any response. */
export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;

/** Any JSON-RPC message. */
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

/**
 * Whether a value can serve as a request id: a string, or a number JSON carries exactly (at most
 * 2^53 − 1 in size). A larger integer has already been rounded by the parser, so an answer to it
 * would carry another id than the one sent; null is refused as an id that answers nothing.
 */
export function isJsonRpcId(value: unknown): value is JsonRpcId {
  return typeof value === "string" ||
    (typeof value === "number" && Math.abs(value) <= Number.MAX_SAFE_INTEGER);
}

/** Whether a value is a well-formed JSON-RPC error object. */
export function isErrorObject(value: unknown): value is JsonRpcErrorObject {
  if (typeof value !== "object" || value === null) return false;
  const e = value as Record<string, unknown>;
  return Number.isInteger(e.code) && typeof e.message === "string";
}

/** An error response: `data` is left out when there is none. */
export function failure(
  id: JsonRpcId | null,
  code: number,
  message: string,
  data?: unknown,
): JsonRpcFailure {
  return {
    jsonrpc: "2.0",
    id,
    error: data === undefined ? { code, message } : { code, message, data },
  };
}

export { exceedsBytes, utf8Length } from "../transport/bytes.ts";

/**
 * The default nesting limit of an incoming frame: 128 levels of arrays and objects, the frame's
 * own object being level 1 (so `params` is level 2). Deeper values would be accepted whole by
 * `JSON.parse` (slowly: seconds for a 16 MiB frame) and then break whoever recurses over them,
 * `JSON.stringify` first (`RangeError`).
 */
export const DEFAULT_MAX_DEPTH = 128;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * Whether JSON text nests arrays and objects deeper than `maxDepth`, read from the raw text
 * (brackets outside strings) in one pass without parsing it. Text too short to reach that depth
 * is not read at all, so the frames of the hot path (a tool call, its ack) cost one comparison.
 */
export function exceedsDepth(text: string, maxDepth: number): boolean {
  // Depth d takes d opening and d closing brackets.
  if (text.length < 2 * maxDepth + 2) return false;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) return false; // unterminated: JSON.parse reports it
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > maxDepth) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

/**
 * The text with every value nested deeper than `maxDepth` replaced by `null`, so that the
 * envelope of a refused frame (its id, method) can be read without parsing what is too deep.
 * Valid JSON in, valid JSON out; text that is not JSON may stay so.
 */
export function withoutDeepValues(text: string, maxDepth: number): string {
  const parts: string[] = [];
  let depth = 0;
  let kept = 0; // start of the text not yet copied
  let cut = false; // inside a value that was replaced
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i < 0) break;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth === maxDepth + 1) {
        parts.push(text.slice(kept, i), "null");
        cut = true;
      }
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) {
      if (depth-- === maxDepth + 1) {
        kept = i + 1;
        cut = false;
      }
    }
  }
  if (!cut) parts.push(text.slice(kept));
  return parts.join("");
}

/** The index of the quote closing the string opened at `open`, or -1 when it is unterminated. */
function stringEnd(text: string, open: number): number {
  let at = open;
  for (;;) {
    const quote = text.indexOf('"', at + 1);
    if (quote < 0) return -1;
    // Escaped when preceded by an odd number of backslashes.
    let before = quote - 1;
    while (text.charCodeAt(before) === BACKSLASH) before--;
    if ((quote - 1 - before) % 2 === 0) return quote;
    at = quote;
  }
}
