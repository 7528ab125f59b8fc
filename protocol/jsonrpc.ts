/** JSON-RPC 2.0 envelopes and the checks that classify a received message. */
import type { JsonRpcErrorObject } from "./errors.ts";

/** A request id. `1` and `"1"` are different ids. */
export type JsonRpcId = string | number;

/** A request: it has an id and expects a response. */
export interface JsonRpcRequest {
  jsonrpc: "2.0";
  id: JsonRpcId;
  method: string;
  params?: unknown;
}

/** A notification: no id, no response. */
export interface JsonRpcNotification {
  jsonrpc: "2.0";
  method: string;
  params?: unknown;
}

/** A successful response. */
export interface JsonRpcSuccess {
  jsonrpc: "2.0";
  id: JsonRpcId;
  result: unknown;
}

/** An error response; `id` is null when the request's id could not be read. */
export interface JsonRpcFailure {
  jsonrpc: "2.0";
  id: JsonRpcId | null;
  error: JsonRpcErrorObject;
}

/** Any response. */
export type JsonRpcResponse = JsonRpcSuccess | JsonRpcFailure;

/** Any JSON-RPC message. */
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse;

/** Whether a value can serve as a request id (a string, or a finite number). */
export function isJsonRpcId(value: unknown): value is JsonRpcId {
  return typeof value === "string" || (typeof value === "number" && Number.isFinite(value));
}

/** Whether a value is a well-formed JSON-RPC error object. */
export function isErrorObject(value: unknown): value is JsonRpcErrorObject {
  if (typeof value !== "object" || value === null) return false;
  const e = value as Record<string, unknown>;
  return Number.isInteger(e.code) && typeof e.message === "string";
}

/** The size of a string encoded as UTF-8, without allocating the encoding. */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 2; // a surrogate pair is 4 bytes for 2 UTF-16 units
        i++;
      } else bytes += 2;
    } else bytes += 2;
  }
  return bytes;
}

/** Whether `text` is over `limit` UTF-8 bytes; cheap for text far under it. */
export function exceedsBytes(text: string, limit: number): boolean {
  if (text.length * 3 <= limit) return false;
  if (text.length > limit) return true;
  return utf8Length(text) > limit;
}
