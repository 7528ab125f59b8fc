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

export { exceedsBytes, utf8Length } from "../transport/bytes.ts";
